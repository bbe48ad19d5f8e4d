#!/usr/bin/env bash
# Session 16, device call 4 (issue 14: GEMM_FUSED <= 0.90 x GEMM at p = 511, 575, 767). The p = 767 carrier
# (y, 64x64x16, 3 stages, three blocks per SM) was chosen on 16x8x4 in session 12 and never built on 16x8x8,
# the shape cuBLAS's DGEMMs issue and the 511/575 carriers run (call 2: the fused paths gained 8 % on it).
# `composer sweep-carrier --order 767 --tiles --only "s3.mb3,mma=16x8x8" --only "s4,mma=16x8x8"` (the shipped
# tile on 16x8x8 at three blocks per SM, 168 registers, 8 B of spills as on 16x8x4; the two-block 4-stage
# tile on 16x8x8), each validated first, then interleaved rounds; the winner into $OUT/gf/sched767; bench
# GEMM,GEMM_FUSED at 767 with it. Build: .cache/build_gf767 (`composer build --arch sm_90 --orders 767 --paths
# GEMM_FUSED --fused-variants tiles`, filtered by tools/filter_build.py to these carriers and the shared
# kernels). Carry: .whl .cache/commit .cache/build_gf767.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/gf
COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf767 timeout 300 python3 -m composer.cli.main sweep-carrier --order 767 \
  --tiles --only "s3.mb3,mma=16x8x8" --only "s4,mma=16x8x8" --schedules-dir $OUT/gf/sched767 \
  --out $OUT/gf/tiles767.json > $OUT/logs/tiles767.log 2>&1; t tiles767 $?
L=$(( 560 - $(elapsed) ))
if [ $L -ge 90 ]; then
  [ -f $OUT/gf/sched767/p0767.toml ] && export COMPOSER_SCHEDULES=$OUT/gf/sched767
  COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf767 timeout $L python3 -m composer.cli.main bench --paths GEMM,GEMM_FUSED \
    --orders 767 --rounds 2 --out $OUT/gf/p767 > $OUT/logs/bench_p767.log 2>&1; t bench_p767 $?
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs gf 2>/dev/null
rm -rf $OUT/gf
cat $OUT/logs/times.txt; grep -hE 'winner|wrote|ms|µs' $OUT/logs/tiles767.log | tail -12; grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_p767.log
