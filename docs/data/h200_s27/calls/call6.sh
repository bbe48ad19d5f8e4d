#!/usr/bin/env bash
# Session 27: what call5.sh left for an H200 (its overlap_face variants ran on an H100 in session 27 call 1:
# x1.020 at 511, x0.996 at 575, not worth H200 time), in one call of about 470 s.
# On an H200:
# 1. Issue 14's figure: `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3` on the shipped
#    schedules (overlap_sms 44 / 32 applied in session 26).
# 2. Issue 16: the plan docs/data/h200_s26/plans/sweep_plan_s26.json at p = 7, 15 (pinned NVRTC 13.5 cubins in
#    .cache/nvrtc_pin3), winners at 1 % into $OUT/sched, the bench of the fused paths with them.
# 3. ncu of the fastest fused tables at p = 7 (FUSED_TC) and 15 (FUSED_TC16) as they stand after step 2.
# On another GPU only step 3 runs (sector counts of the same binaries: relative evidence), then the call stops.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin3. KEEP="docs/data/h200_s26" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
prof_fused() {
  COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin3 timeout 90 python3 -m composer.cli.main profile --paths FUSED_TC \
    --orders 7 --out $OUT/prof/p7 > $OUT/logs/prof7.log 2>&1; t prof7 $?
  COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin3 timeout 90 python3 -m composer.cli.main profile --paths FUSED_TC16 \
    --orders 15 --out $OUT/prof/p15 > $OUT/logs/prof15.log 2>&1; t prof15 $?
  tail -n 12 $OUT/logs/prof7.log $OUT/logs/prof15.log | cut -c1-160
}
if [[ "$GPU" != *H200* ]]; then echo "not an H200 ($GPU): the ncu step only"; prof_fused; finish_call prof; exit 0; fi
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout 150 python3 -m composer.cli.main bench \
  --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3 --out $OUT/bench/lib > $OUT/logs/bench_lib.log 2>&1
t bench_lib $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_lib.log | cut -d'|' -f2,3,6,10,11
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin3
sweep_apply docs/data/h200_s26/plans/sweep_plan_s26.json 7,15 90 0.01
timeout 80 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 \
  --orders 7,15 --rounds 2 --out $OUT/bench/fused > $OUT/logs/bench_fused.log 2>&1; t bench_fused $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_fused.log | cut -d'|' -f2,3,6,10,11
[ $(( 560 - $(elapsed) )) -gt 150 ] && prof_fused
finish_call bench sw sched prof
