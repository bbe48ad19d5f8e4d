#!/usr/bin/env bash
# Session 29 call 5 (any GPU, about 150 s): the paired p = 7 table on an odd grid. Call 4 found test_fused_gpu's
# FUSED_TC16 p = 7 check on the small grid [3, 2, 2] refused since session 26 (its table pairs x neighbours, x_pairs);
# the path now runs such a table one element per block there. GPU tests: test_fused_gpu at p = 7 (small and
# Table S29 grids), tests/test_fused_xfaces.py (the x_pairs candidates, the odd-grid fallback).
# Carry: .whl .cache/commit .cache/nvrtc_pin5. KEEP="docs/data/h200_s28 docs/data/h200_s29" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5
[ -n "$ONLY_XFACES" ] || timeout 150 python3 -m pytest -q -m gpu tests/test_fused_gpu.py -k "test_fused_paths_match_reference and 7-" \
  > $OUT/logs/gpu_fused7.log 2>&1; t gpu_fused7 $?
tail -2 $OUT/logs/gpu_fused7.log
timeout 200 python3 -m pytest -q -m gpu tests/test_fused_xfaces.py -rs > $OUT/logs/gpu_xfaces.log 2>&1; t gpu_xfaces $?
tail -4 $OUT/logs/gpu_xfaces.log
finish_call
