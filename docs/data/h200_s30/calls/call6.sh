#!/usr/bin/env bash
# Session 30 call 6 (any GPU; about 560 s on an H200, at most 450 s elsewhere). On an H200: session 28's call 6. On any
# other GPU: every GPU test of tests/test_fused_xchain.py (each x_chain candidate of the three variants against the
# reference on small non-cubic grids and the Table S29 grids at p = 7 and 15; the fallback of a chained schedule on a
# mesh that does not chain), then tests/test_fused_xfaces.py's GPU tests (the engine's thread index is now a template
# variable; the shipped sources are pinned by the CPU tests).
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5 .cache/nvrtc_pin7.
# KEEP="docs/data/h200_s28 docs/data/h200_s29 docs/data/h200_s30" tools/device_slim.sh on.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  CALL_BUDGET_S=560 exec bash docs/data/h200_s28/calls/call6.sh
fi
set -o pipefail
source tools/device_prelude.sh
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin7
timeout 300 python3 -m pytest -q -m gpu tests/test_fused_xchain.py -rs > $OUT/logs/gpu_xchain.log 2>&1; t gpu_xchain $?
tail -3 $OUT/logs/gpu_xchain.log
left=$(( 440 - $(elapsed) ))
timeout $left python3 -m pytest -q -m gpu tests/test_fused_xfaces.py -rs > $OUT/logs/gpu_xfaces.log 2>&1; t gpu_xfaces $?
tail -3 $OUT/logs/gpu_xfaces.log
finish_call
