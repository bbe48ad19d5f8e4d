#!/usr/bin/env bash
# Session 19, device call 8 (issue 16; replaces the refused call 7). (1) The table key l2_keep at p = 15: the
# flux_tiles kernels moved 1643 MB of DRAM against 1397 for the four-tile one (call 6 ncu), the restage of q
# missing in L2; l2_keep loads q evict_last at staging and evict_first at the restage (plan: `COMPOSER_CACHE_DIR=
# $PWD/.cache/nvrtc_pin composer sweep-fused check --orders 15 --subset l2_keep --pin-nvrtc --plan
# docs/data/h200_s19/plans/sweep_plan_keep.json`), applied with --min-gain 0.01; (2) the GPU tests of the fused
# paths at p = 7-63 on the small non-cubic and the Table S29 grids, every table on its compiler; (3) ncu of
# FUSED_TC at p = 15 on the applied tables. Carry: .whl .cache/commit .cache/nvrtc_pin .cache/build_n135.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin
mkdir -p $OUT/prof
sweep_apply docs/data/h200_s19/plans/sweep_plan_keep.json 15 100 0.01
export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135
T="tests/test_fused_gpu.py::test_fused_paths_match_reference"
timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider -s "$T[7-grid0-small]" "$T[15-grid1-small]" "$T[31-grid2-small]" \
  "$T[63-grid3-small]" "$T[7-grid5-benchmark]" "$T[15-grid6-benchmark]" "$T[31-grid7-benchmark]" \
  "$T[63-grid8-benchmark]" > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
left=$(( 540 - $(elapsed) ))
[ $left -gt 40 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED_TC,FUSED_TC16 --orders 15 \
  --out $OUT/prof/p15 > $OUT/logs/prof.log 2>&1; t prof $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
finish_call sw sched prof
grep -E "passed|failed|rel_err" $OUT/logs/gpu_tests.log | cut -c1-160 | tail -12
grep -hE "│ fused" $OUT/logs/prof.log | cut -c1-200
