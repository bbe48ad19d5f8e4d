#!/usr/bin/env bash
# Session 27 call 10 (about 200 s on an H100, 480 on an H200): issue 14's `overlap_formed` (the first GEMM forms its
# own flux once per staged element, so no product runs alone: the 1.25-ms first phase of session 26's timeline).
# 1. (any GPU) `tools/variants_bench.py` at p = 511 (shipped overlap on 44 SMs; formed on 44, 32, 56) and 575
#    (shipped on 32; formed on 32, 44), interleaved with GEMM, each variant validated first; then the timeline of the
#    formed plan at 511 (`composer graph --measure --option GEMM_FUSED.overlap_formed=true`).
# 2. (H200 only) issue 14's figure `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3` on
#    the shipped schedules, then the tile_swizzle plan at p = 15 (call7.sh's first step) with the bench at 15.
# Build: .cache/build_formed (`COMPOSER_SCHEDULES=<schedules with overlap_formed = true at 511, 575> composer build
# --arch sm_90 --orders 511,575 --paths GEMM_FUSED --out .cache/build_formed`: the y carriers and z forming q*w).
# Carry: .whl .cache/commit .cache/build_formed .cache/nvrtc_pin4. KEEP="docs/data/h200_s27".
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ov $OUT/graph $OUT/bench
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export COMPOSER_BUILD_DIR=$PWD/.cache/build_formed
timeout 150 python3 tools/variants_bench.py --order 511 --variant GEMM_FUSED --variant GEMM_FUSED:overlap_formed=true \
  --variant 'GEMM_FUSED:overlap_formed=true;overlap_sms=32' --variant 'GEMM_FUSED:overlap_formed=true;overlap_sms=56' \
  --variant GEMM --rounds 3 --calls 3 --out $OUT/ov/p511.json > $OUT/logs/ov511.log 2>&1
t ov511 $?
grep -E "us +x|error|Error" $OUT/logs/ov511.log | cut -c1-150
timeout 120 python3 tools/variants_bench.py --order 575 --variant GEMM_FUSED --variant GEMM_FUSED:overlap_formed=true \
  --variant 'GEMM_FUSED:overlap_formed=true;overlap_sms=44' --variant GEMM --rounds 3 --calls 2 \
  --out $OUT/ov/p575.json > $OUT/logs/ov575.log 2>&1
t ov575 $?
grep -E "us +x|error|Error" $OUT/logs/ov575.log | cut -c1-150
timeout 60 python3 -m composer.cli.main graph --path GEMM_FUSED --order 511 --measure --repeats 5 \
  --option GEMM_FUSED.overlap_formed=true --out $OUT/graph/p511_formed.json > $OUT/logs/graph511.log 2>&1
t graph511 $?
grep -E "gemm_|volume_flux|surface|measured|serial" $OUT/logs/graph511.log | head -20 | cut -c1-150
if [[ "$GPU" != *H200* ]]; then echo "not an H200 ($GPU): the variants and timeline only"; finish_call ov graph; exit 0; fi
timeout 170 python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3 \
  --out $OUT/bench/lib > $OUT/logs/bench_lib.log 2>&1
t bench_lib $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_lib.log | cut -d'|' -f2,3,6,10,11
unset COMPOSER_BUILD_DIR
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin4
sweep_apply docs/data/h200_s27/plans/sweep_plan_swz.json 15 60 0.01
left=$(( 570 - $(elapsed) ))
[ $left -gt 40 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16 \
  --orders 15 --rounds 2 --out $OUT/bench/p15 > $OUT/logs/bench_p15.log 2>&1; t bench_p15 $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_p15.log | cut -d'|' -f2,3,6,10,11
finish_call ov graph bench sw sched
