#!/usr/bin/env bash
# Session 12, device call 6 (issue 14): GEMM_FUSED at p = 767 on the carrier call 5's sweep chose (the
# 64x64x16 3-stage 16x8x4 tile compiled for three blocks per SM: 52.46 ms against the shipped 53.20),
# interleaved with GEMM and GEMM_CUTE (.cache/sched_s12/p0767.toml, the sweep's output, as COMPOSER_SCHEDULES).
# Carry: .whl .cache/build_s12gf767 .cache/sched_s12 .cache/commit.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/gf
COMPOSER_SCHEDULES=$ROOT/.cache/sched_s12 COMPOSER_BUILD_DIR=$ROOT/.cache/build_s12gf767 timeout 330 \
  python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 767 --rounds 2 \
  --out $OUT/gf/p767 > $OUT/logs/bench_p767.log 2>&1; t bench_p767 $?
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs gf 2>/dev/null
rm -rf $OUT/gf
cat $OUT/logs/times.txt; tail -12 $OUT/logs/bench_p767.log
