#!/usr/bin/env bash
# Session 30 call 2 (any GPU; about 560 s on an H200, 540 s elsewhere). On an H200: session 28's call 6 (issue 16's
# p = 15 xyz-cluster sweep and bench, issue 14's `composer bench --paths GEMM,GEMM_FUSED --orders 511,575`). On any other
# GPU: issue 16's x chains (new in session 30: `x_chain = true` with `elements_per_block = L`, a block walks L x
# neighbours and carries the faces they share on chip): the GPU tests on small grids (tests/test_fused_xchain.py), then
# `composer sweep-fused run` of docs/data/h200_s30/plans/sweep_plan_xchain.json at p = 7 and 15 (every candidate
# validated on the Table S29 grid, then timed against the table itself and the machine's shipped one), winners at 1 %.
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
timeout 150 python3 -m pytest -q -m gpu tests/test_fused_xchain.py -k "7-grid0 or runs_one_element" -rs \
  > $OUT/logs/gpu_xchain.log 2>&1; t gpu_xchain $?
tail -3 $OUT/logs/gpu_xchain.log
left=$(( 545 - 50 - $(elapsed) ))
sweep_apply docs/data/h200_s30/plans/sweep_plan_xchain.json 7,15 $left 0.01
finish_call sw sched
