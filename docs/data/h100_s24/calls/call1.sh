#!/usr/bin/env bash
# Session 24, device call 1: session 23's call 1 (issue 14: the volume flux overlapped with the first GEMM,
# `overlap_sms`; predictions committed in 6a8b77d, docs/data/h200_s22/predictions) with the DMMA latency loops
# (issue 15, tools/dmma_pipe.py, about 15 s) in front. The p = 511 overlap variants run on any GPU (their ratios
# score the H200 predictions only on an H200); the GPU's name decides the rest: on an H200 session 23's p = 255
# variants and the graph measurement, on another GPU the GPU tests of session 21's fused table keys.
# Carry: .whl .cache/commit .cache/build_s22 (`composer build --arch sm_90 --paths GEMM_FUSED --orders
# 15,255,511,575,767 --out .cache/build_s22`).
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s22
mkdir -p $OUT/ov $OUT/graph $OUT/bench
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
timeout 90 python3 tools/dmma_pipe.py --out $OUT/logs/dmma_pipe.json > $OUT/logs/dmma_pipe.log 2>&1; t dmma_pipe $?
cat $OUT/logs/dmma_pipe.log | cut -c1-200 | head -12
timeout 60 python3 -m pytest -q -m gpu tests/test_dmma_pipe.py > $OUT/logs/gpu_dmma_pipe.log 2>&1; t gpu_dmma_pipe $?
tail -1 $OUT/logs/gpu_dmma_pipe.log
timeout 150 python3 -m pytest -q -m gpu tests/test_flux_overlap_gpu.py -k "not 511" > $OUT/logs/gpu_overlap.log 2>&1
t gpu_overlap $?
tail -3 $OUT/logs/gpu_overlap.log; grep -E "^(FAILED|ERROR)|Error|assert" $OUT/logs/gpu_overlap.log | head -20 | cut -c1-220
V="--variant GEMM_FUSED"
for n in 24 32 44 56; do V="$V --variant GEMM_FUSED:overlap_sms=$n"; done
V="$V --variant GEMM"; for n in 24 32 44; do V="$V --variant GEMM:overlap_sms=$n"; done
timeout 200 python3 tools/variants_bench.py --order 511 $V --rounds 3 --calls 3 --out $OUT/ov/p511.json \
  > $OUT/logs/ov511.log 2>&1; t ov511 $?
cut -c1-190 $OUT/logs/ov511.log | tail -12
if [[ "$GPU" == *H200* ]]; then
  left=$(( 420 - $(elapsed) ))
  [ $left -gt 50 ] && timeout $left python3 tools/variants_bench.py --order 255 --variant GEMM_FUSED \
    --variant GEMM_FUSED:overlap_sms=32 --variant GEMM_FUSED:overlap_sms=44 --variant GEMM --variant GEMM:overlap_sms=32 \
    --rounds 3 --calls 10 --out $OUT/ov/p255.json > $OUT/logs/ov255.log 2>&1; t ov255 $?
  cut -c1-190 $OUT/logs/ov255.log | tail -6
  left=$(( 500 - $(elapsed) ))
  [ $left -gt 60 ] && timeout $left python3 -m composer.cli.main graph --path GEMM_FUSED --order 511 --measure --repeats 5 \
    --option GEMM_FUSED.overlap_sms=32 --out $OUT/graph/gf511_ov32.json > $OUT/logs/graph.log 2>&1; t graph $?
  grep -E "overlap gained|measured call|contention|FALLBACK|priority" $OUT/logs/graph.log
else
  # not an H200: no bench here (a prospective test of this machine needs its predictions committed first);
  # the GPU tests of session 21's fused table keys instead (machine-independent)
  left=$(( 560 - $(elapsed) ))
  timeout $left python3 -m pytest -q -m gpu tests/test_fused_xfaces.py > $OUT/logs/gpu_xfaces.log 2>&1; t gpu_xfaces $?
  tail -3 $OUT/logs/gpu_xfaces.log
fi
finish_call ov graph bench
