#!/usr/bin/env bash
# Session 26, for the next session's first H200 call (about 480 s): what sessions 25-26 left, in one call.
# 1. Issue 14: `overlap_face` at p = 511 and 575 (call 4's variants run; expected x0.985-x1.002 of the shipped
#    overlap), then `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3` on the shipped
#    schedules (the figure with the overlap applied in session 26).
# 2. Issue 16: the plan docs/data/h200_s26/plans/sweep_plan_s26.json at p = 7, 15 (families strip, x_pairs,
#    flux_tiles on the tables session 26 applied; `sweep-fused check --orders 7,15 --subset strip,x_pairs,flux_tiles
#    --pin-nvrtc` with COMPOSER_CACHE_DIR=.cache/nvrtc_pin3), winners at 1 % into $OUT/sched, and the bench of the
#    fused paths at those orders with them.
# On another GPU only item 1's variants run (relative evidence), then the call stops.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin3. KEEP="docs/data/h200_s26" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ov $OUT/bench
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s22
timeout 100 python3 tools/variants_bench.py --order 511 --variant GEMM_FUSED --variant GEMM_FUSED:overlap_face=true \
  --variant GEMM --rounds 3 --calls 3 --out $OUT/ov/p511.json > $OUT/logs/ov511.log 2>&1
t ov511 $?
grep -E "us +x" $OUT/logs/ov511.log | cut -c1-140
timeout 80 python3 tools/variants_bench.py --order 575 --variant GEMM_FUSED --variant GEMM_FUSED:overlap_face=true \
  --variant GEMM --rounds 3 --calls 2 --out $OUT/ov/p575.json > $OUT/logs/ov575.log 2>&1
t ov575 $?
grep -E "us +x" $OUT/logs/ov575.log | cut -c1-140
if [[ "$GPU" != *H200* ]]; then echo "not an H200 ($GPU): stopping after the variants"; finish_call ov; exit 0; fi
timeout 150 python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3 \
  --out $OUT/bench/lib > $OUT/logs/bench_lib.log 2>&1
t bench_lib $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_lib.log | cut -d'|' -f2,3,6,10,11
unset COMPOSER_BUILD_DIR
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin3
sweep_apply docs/data/h200_s26/plans/sweep_plan_s26.json 7,15 90 0.01
left=$(( 520 - $(elapsed) ))
[ $left -gt 50 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 \
  --orders 7,15 --rounds 2 --out $OUT/bench/fused > $OUT/logs/bench_fused.log 2>&1; t bench_fused $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_fused.log | cut -d'|' -f2,3,6,10,11
finish_call ov bench sw sched
