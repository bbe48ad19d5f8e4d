#!/usr/bin/env bash
# Session 19, device call 7 (issue 16): the GPU tests of the fused paths at the orders whose tables changed this
# session (p = 7, 15, 31, 63: flux_tiles, pair_io, p = 63's 16-k D panel), every table on its compiler
# (COMPOSER_BUILD_DIR = the NVRTC 13.5 build of this tree): each variant against the reference on the point-varying
# input, on the small non-cubic grid and on the Table S29 benchmark grid (max|diff|/max|ref| <= 1e-12).
# Carry: .whl .cache/commit .cache/build_n135.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135
T="tests/test_fused_gpu.py::test_fused_paths_match_reference"
timeout 400 python3 -m pytest -q -m gpu -p no:cacheprovider -s "$T[7-grid0-small]" "$T[15-grid1-small]" "$T[31-grid2-small]" \
  "$T[63-grid3-small]" "$T[7-grid5-benchmark]" "$T[15-grid6-benchmark]" "$T[31-grid7-benchmark]" \
  "$T[63-grid8-benchmark]" > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
finish_call
grep -E "rel_err|passed|failed|error" $OUT/logs/gpu_tests.log | cut -c1-200 | tail -40
