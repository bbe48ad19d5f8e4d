#!/usr/bin/env bash
# Session 32 call 1 (any GPU). On an H200 it runs session 31's call 2 (issue 15's within-H200 shape transfer, then
# call 5: element_bricks and interior_maps swept into the generic tables at p = 7, 15, 63). Elsewhere (about 200 s):
# the GPU tests session 31 left CPU-checked only (the overlay's small-grid run of a paired table's one-element form,
# the element-order and mapless-face tests on their shared helper). Carry: .whl .cache.
source tools/device_h200_first.sh docs/data/h200_s31/calls/call2.sh 560
set -o pipefail
source tools/device_prelude.sh
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin8
timeout 300 python3 -m pytest -q -m gpu tests/test_fused_element_order.py tests/test_fused_interior_maps.py \
  tests/test_machine_schedules.py -rs > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -6 $OUT/logs/gpu_tests.log
finish_call
