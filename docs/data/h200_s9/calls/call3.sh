#!/usr/bin/env bash
# Session 9, device call 3 (final tree): the GPU tests of every path, the scheduler, green contexts and
# clusters; then GEMM_FUSED's small-grid validation at p = 767 alone (cut by the time limit in sessions 7
# and 8), with the shipped schedule's variant from .cache/build_s9.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s9
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=5 tests/test_paths_gpu.py tests/test_sched_gpu.py \
  tests/test_green_gpu.py tests/test_cluster.py > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
L=$(( 540 - $(elapsed) )); [ $L -gt 120 ] && { timeout $L python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gemm_fused_gpu.py -k "every_order and 767" > $OUT/logs/gf_gpu_767.log 2>&1; t gf_gpu_767 $?; }
cat $OUT/logs/times.txt; tail -8 $OUT/logs/gpu_tests.log; tail -3 $OUT/logs/gf_gpu_767.log
