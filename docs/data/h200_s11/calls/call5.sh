#!/usr/bin/env bash
# Session 11, device call 5: ncu of the two designs session 11's sweeps measured slower than the shipped
# kernels: GEMM_FUSED at p = 511 with the asynchronous-epilogue carrier (the shipped 128x64x16 tile,
# async_epilogue_tiles = 8: 11.40 ms against 10.79 in call 2's sweep), and FUSED_TC16 at p = 127 with the
# fastest clustered xy|z table (780.4 us against 622.4 in call 4's sweep). Schedules: .cache/sched_prof (copied to docs/data/h200_s11/call5/sched).
# Carry: .whl .cache/build_gf_hi .cache/sched_prof .cache/commit.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/prof
export COMPOSER_SCHEDULES=$ROOT/.cache/sched_prof
COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf_hi timeout 200 python3 -m composer.cli.main profile --paths GEMM_FUSED \
  --orders 511 --out $OUT/prof/ae511 > $OUT/logs/prof_ae511.log 2>&1; t prof_ae511 $?
timeout 150 python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 127 --out $OUT/prof/cl127 \
  > $OUT/logs/prof_cl127.log 2>&1; t prof_cl127 $?
tar -C $OUT -czf $OUT/results.tgz logs prof 2>/dev/null
rm -rf $OUT/prof
cat $OUT/logs/times.txt; tail -25 $OUT/logs/prof_ae511.log; tail -12 $OUT/logs/prof_cl127.log
