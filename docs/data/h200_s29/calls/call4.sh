#!/usr/bin/env bash
# Session 29 call 4 (any GPU; about 330 s on an H200, at most 400 s elsewhere). On an H200: session 28's call 6. On any
# other GPU: the GPU tests after the machine overlays (every Device now identifies its machine; conftest pins the
# generic schedules): tests/test_paths_gpu.py (every path against the reference), tests/test_machine_schedules.py, and
# test_fused_gpu's reference checks at p = 7, 15, 31, 63.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5. KEEP="docs/data/h200_s28 docs/data/h200_s29" tools/device_slim.sh on.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  CALL_BUDGET_S=560 exec bash docs/data/h200_s28/calls/call6.sh
fi
set -o pipefail
source tools/device_prelude.sh
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5 COMPOSER_BUILD_DIR=$PWD/.cache/build_s22
timeout 120 python3 -m pytest -q -m gpu tests/test_machine_schedules.py > $OUT/logs/gpu_overlay.log 2>&1; t gpu_overlay $?
tail -2 $OUT/logs/gpu_overlay.log
timeout 150 python3 -m pytest -q -m gpu tests/test_fused_gpu.py -k "test_fused_paths_match_reference and (7- or 15- or 31- or 63-)" \
  > $OUT/logs/gpu_fused.log 2>&1; t gpu_fused $?
tail -2 $OUT/logs/gpu_fused.log
left=$(( 390 - $(elapsed) ))
timeout $left python3 -m pytest -q -m gpu tests/test_paths_gpu.py -x > $OUT/logs/gpu_paths.log 2>&1; t gpu_paths $?
tail -4 $OUT/logs/gpu_paths.log
finish_call
