#!/usr/bin/env bash
# Session 27 call 12 (about 300 s, H200 only; stops at once on another GPU): call7.sh shortened to what the H100 could
# not answer. 1. `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3` (issue 14's figure
# with the overlap session 26 applied). 2. The tile_swizzle plan at p = 15 (docs/data/h200_s27/plans/sweep_plan_swz.json,
# pinned 13.5 cubins), winners at 1 % into $OUT/sched, ncu of FUSED_TC16 at 15 on them, the bench at 15.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin4. KEEP="docs/data/h200_s27".
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
record_gpu
h200_only
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout 170 python3 -m composer.cli.main bench \
  --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3 --out $OUT/bench/lib > $OUT/logs/bench_lib.log 2>&1
t bench_lib $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_lib.log | cut -d'|' -f2,3,6,10,11
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin4
sweep_apply docs/data/h200_s27/plans/sweep_plan_swz.json 15 60 0.01
timeout 60 python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 15 --out $OUT/prof/p15 \
  > $OUT/logs/prof15.log 2>&1; t prof15 $?
grep -E "fused_tc" $OUT/logs/prof15.log | cut -c1-200
left=$(( 560 - $(elapsed) ))
[ $left -gt 40 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 \
  --orders 15 --rounds 2 --out $OUT/bench/p15 > $OUT/logs/bench_p15.log 2>&1; t bench_p15 $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_p15.log | cut -d'|' -f2,3,6,10,11
finish_call bench sw sched prof
