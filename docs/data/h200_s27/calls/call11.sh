#!/usr/bin/env bash
# Session 27 call 11: on an H200, call7.sh. On another GPU (about 150 s): the GPU tests of session 27's new code
# (correctness holds on any sm_90): every tile_swizzle candidate against the reference (small and Table S29 grids;
# pinned 13.5 cubins), and GEMM_FUSED with overlap_formed at p = 511 and 575 (build .cache/build_formed).
# Carry: .whl .cache/commit .cache/build_s22 .cache/build_formed .cache/nvrtc_pin4. KEEP="docs/data/h200_s26 docs/data/h200_s27".
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then exec bash docs/data/h200_s27/calls/call7.sh; fi
set -o pipefail
source tools/device_prelude.sh
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin4 timeout 200 python3 -m pytest -q -m gpu tests/test_fused_swizzle.py \
  > $OUT/logs/test_swizzle.log 2>&1; t test_swizzle $?
tail -n 3 $OUT/logs/test_swizzle.log
COMPOSER_BUILD_DIR=$PWD/.cache/build_formed timeout 300 python3 -m pytest -q -m gpu tests/test_flux_overlap_gpu.py \
  -k forming > $OUT/logs/test_formed.log 2>&1; t test_formed $?
tail -n 3 $OUT/logs/test_formed.log
finish_call
