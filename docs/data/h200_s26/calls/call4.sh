#!/usr/bin/env bash
# Session 26, device call 4 (about 120 s; 322 s of device budget were left), on any GPU (the figures are the GPU's own; the issue's are the H200's):
# 1. `overlap_face` (new: the face flux behind the confined products, so that the first product runs alone; the
#    H100's call timeline at p = 511 had the first product and the face flux together 1.25 ms, the product alone
#    1.08): tools/variants_bench.py at p = 511 and 575 against the shipped overlap and GEMM, and the call's timeline
#    (`composer graph --measure`) at 511 with it.
# 2. On an H200 only: `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3` (call 3's).
# Carry: .whl .cache/commit .cache/build_s22. KEEP="" tools/device_slim.sh on first.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ov $OUT/bench $OUT/graph
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s22
timeout 100 python3 tools/variants_bench.py --order 511 --variant GEMM_FUSED --variant GEMM_FUSED:overlap_face=true \
  --variant GEMM --rounds 3 --calls 3 \
  --out $OUT/ov/p511.json > $OUT/logs/ov511.log 2>&1
t ov511 $?
grep -E "us +x" $OUT/logs/ov511.log | cut -c1-140
timeout 80 python3 tools/variants_bench.py --order 575 --variant GEMM_FUSED --variant GEMM_FUSED:overlap_face=true \
  --variant GEMM --rounds 3 --calls 2 --out $OUT/ov/p575.json > $OUT/logs/ov575.log 2>&1
t ov575 $?
grep -E "us +x" $OUT/logs/ov575.log | cut -c1-140
timeout 40 python3 -m composer.cli.main graph --path GEMM_FUSED --order 511 --measure --repeats 5 \
  --option GEMM_FUSED.overlap_face=true --out $OUT/graph/p511_face.json > $OUT/logs/graph.log 2>&1
t graph $?
grep -A9 "measured (medians" $OUT/logs/graph.log | tail -8 | cut -c1-80
left=$(( 200 - $(elapsed) ))
if [[ "$GPU" == *H200* ]] && [ $left -gt 100 ]; then
  timeout $left python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3 \
    --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
  grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
fi
finish_call ov bench graph
