#!/usr/bin/env bash
# Session 30 call 9 (any GPU; about 560 s on an H200, 200 s elsewhere). On an H200: session 28's call 6 bounded to 480 s.
# On any other GPU: x chains with the next element prefetched (new: `x_prefetch = true`, the chain's next element's q,
# u, v, w copied into shared memory by cp.async during this one's contractions; call 5 had the chained kernels waiting
# on global loads): the GPU tests of tests/test_fused_xchain.py at p = 7 (every x_chain candidate, prefetched ones
# included, against the reference on a small grid and the Table S29 grid), then `composer sweep-fused run` of
# docs/data/h200_s30/plans/sweep_plan_xpf7.json (the prefetched chains and the plain L = 8 chains against the tables).
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5 .cache/nvrtc_pin7.
# KEEP="docs/data/h200_s28 docs/data/h200_s29 docs/data/h200_s30" tools/device_slim.sh on.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  CALL_BUDGET_S=480 exec bash docs/data/h200_s28/calls/call6.sh
fi
set -o pipefail
source tools/device_prelude.sh
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin7
timeout 150 python3 -m pytest -q -m gpu tests/test_fused_xchain.py -k "match_reference_on_the_gpu and 7-" -rs \
  > $OUT/logs/gpu_xchain.log 2>&1; t gpu_xchain $?
tail -3 $OUT/logs/gpu_xchain.log
sweep_apply docs/data/h200_s30/plans/sweep_plan_xpf7.json 7 100 0.01
finish_call sw sched
