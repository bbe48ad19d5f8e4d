#!/usr/bin/env bash
# Session 12, device call 5 (issue 14): (a) GEMM_FUSED at p = 575 on the carrier call 4's sweep chose (the
# 64x64x16 4-stage tile compiled for three blocks per SM: 17.76 ms against the shipped 18.03) interleaved
# with GEMM and GEMM_CUTE (its schedule: .cache/sched_s12/p0575.toml, the sweep's output, as
# COMPOSER_SCHEDULES); (b) the same candidates at p = 767 (carrier sweep --only mb, .cache/build_s12gf767).
# Carry: .whl .cache/build_s12gf .cache/build_s12gf767 .cache/sched_s12 .cache/commit.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/gf
COMPOSER_SCHEDULES=$ROOT/.cache/sched_s12 COMPOSER_BUILD_DIR=$ROOT/.cache/build_s12gf timeout 200 \
  python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 575 --rounds 3 \
  --out $OUT/gf/p575 > $OUT/logs/bench_p575.log 2>&1; t bench_p575 $?
L=$(( 570 - $(elapsed) ))
if [ $L -ge 60 ]; then
  COMPOSER_BUILD_DIR=$ROOT/.cache/build_s12gf767 timeout $L python3 -m composer.cli.main sweep-carrier --order 767 \
    --tiles --async-epilogue --only mb --schedules-dir $OUT/gf/sched767 --out $OUT/gf/mb767.json \
    > $OUT/logs/mb767.log 2>&1; t mb767 $?
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs gf 2>/dev/null
rm -rf $OUT/gf
cat $OUT/logs/times.txt; tail -12 $OUT/logs/bench_p575.log; grep -hE 'winner|wrote' $OUT/logs/mb767.log || true
