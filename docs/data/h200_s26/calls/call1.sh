#!/usr/bin/env bash
# Session 25, for the next H200 (about 560 s): the two measurements the open targets wait for, in one call.
# 1. Issue 14 at p = 511: the volume flux overlapped with the first GEMM (`overlap_sms`), validated and timed
#    interleaved with GEMM (tools/variants_bench.py): scores the predictions of 6a8b77d (x0.939-0.960 of the unsplit
#    call) and tells whether GEMM_FUSED reaches 0.90 x GEMM there.
# 2. Issue 16 at p = 7-63: session 21's plan (the second `traces = "xfaces"` form, x_pairs, the budget family on early
#    weights), which won 4-5.5 % at p = 15 on an H100 (session 25, results.md section 3); winners applied at 1 %
#    into $OUT/sched, then `composer bench` of GEMM and the fused paths at those orders with them.
# 3. If time is left: the overlap at p = 575 (predictions 4da3142).
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin2 (commands in h100_s24/calls/call1.sh and
# h200_s21/calls/call2.sh). KEEP="docs/data/h200_s21 docs/data/h200_s25" tools/device_slim.sh on first.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ov $OUT/bench
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
[[ "$GPU" == *H200* ]] || echo "not an H200 ($GPU): the figures are this GPU's, the targets the H200's" | tee -a $OUT/logs/gpu.txt
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout 150 python3 tools/variants_bench.py --order 511 --variant GEMM_FUSED \
  --variant GEMM_FUSED:overlap_sms=32 --variant GEMM_FUSED:overlap_sms=44 --variant GEMM_FUSED:overlap_sms=56 \
  --variant GEMM --variant GEMM:overlap_sms=32 --rounds 3 --calls 3 --out $OUT/ov/p511.json > $OUT/logs/ov511.log 2>&1
t ov511 $?
grep -E "us +x" $OUT/logs/ov511.log | cut -c1-160
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin2
sweep_apply docs/data/h200_s21/plans/sweep_plan_budget2.json 7,15,31,63 150 0.01
left=$(( 430 - $(elapsed) ))
[ $left -gt 60 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 \
  --orders 7,15,31,63 --rounds 2 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
unset COMPOSER_SCHEDULES COMPOSER_CACHE_DIR
left=$(( 560 - $(elapsed) ))
[ $left -gt 80 ] && COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout $left python3 tools/variants_bench.py --order 575 \
  --variant GEMM_FUSED --variant GEMM_FUSED:overlap_sms=32 --variant GEMM_FUSED:overlap_sms=44 --variant GEMM \
  --rounds 3 --calls 2 --out $OUT/ov/p575.json > $OUT/logs/ov575.log 2>&1; t ov575 $?
grep -E "us +x" $OUT/logs/ov575.log 2>/dev/null | cut -c1-160
finish_call ov bench sw sched
