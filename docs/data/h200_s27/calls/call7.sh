#!/usr/bin/env bash
# Session 27 call 7 (about 480 s, H200 only: call 3 ran step 1 on an H100, docs/data/h100_s27/call3): issue 16.
# 1. (any GPU) `composer sweep-fused run` of docs/data/h200_s27/plans/sweep_plan_swz.json at p = 15, 31, 63 (the
#    family tile_swizzle on the shipped tables; pinned NVRTC 13.5 cubins in .cache/nvrtc_pin4), winners at 1 % into
#    $OUT/sched; then ncu of FUSED_TC16 and FUSED_TC at p = 15 on what was applied (DRAM bytes: the restage's q/w
#    re-read gone?). On an H100 the winners are relative evidence only (not copied into schedules/).
# 2. the bench of GEMM and the fused paths at p = 15, 31, 63 with those tables, then call6.sh's issue-14
#    figure: `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3`.
# 3. session 26's plan docs/data/h200_s27/plans/sweep_plan_s27.json at p = 7 (its cubins merged into nvrtc_pin4),
#    winners at 1 %, and the bench of the fused paths at p = 7.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin4. KEEP="docs/data/h200_s27" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
record_gpu
h200_only
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin4
sweep_apply docs/data/h200_s27/plans/sweep_plan_swz.json 15,31,63 120 0.01
mkdir -p $OUT/swz && mv $OUT/sw $OUT/logs/sweep.log $OUT/logs/apply.log $OUT/swz/
timeout 100 python3 -m composer.cli.main profile --paths FUSED_TC16,FUSED_TC --orders 15 --out $OUT/prof/p15 \
  > $OUT/logs/prof15.log 2>&1; t prof15 $?
grep -E "fused_tc" $OUT/logs/prof15.log | cut -c1-170
timeout 100 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 --orders 15,31,63 \
  --rounds 2 --out $OUT/bench/fused > $OUT/logs/bench_fused.log 2>&1; t bench_fused $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_fused.log | cut -d'|' -f2,3,6,10,11
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout 170 python3 -m composer.cli.main bench \
  --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3 --out $OUT/bench/lib > $OUT/logs/bench_lib.log 2>&1
t bench_lib $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_lib.log | cut -d'|' -f2,3,6,10,11
sweep_apply docs/data/h200_s27/plans/sweep_plan_s27.json 7 60 0.01
left=$(( 570 - $(elapsed) ))
[ $left -gt 40 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 \
  --orders 7 --rounds 2 --out $OUT/bench/p7 > $OUT/logs/bench_p7.log 2>&1; t bench_p7 $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_p7.log | cut -d'|' -f2,3,6,10,11
cat $OUT/swz/apply.log; grep -E '^\{' $OUT/swz/sweep.log | cut -c1-200
finish_call swz sw sched prof bench
