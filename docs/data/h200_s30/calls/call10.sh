#!/usr/bin/env bash
# Session 30 call 10 (any GPU; about 360 s on an H200, 60 s elsewhere). On an H200: session 28's call 6 bounded to 360 s
# (the p = 15 xyz-cluster sweep and bench first). On any other GPU: after the review fixes (x_prefetch's shared memory
# declared 16-byte aligned, its next-element copy guarded by e + 1 < ne), the x_chain GPU tests at p = 7 again (every
# chained and prefetched candidate against the reference on a small grid and the Table S29 grid).
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5 .cache/nvrtc_pin7.
# KEEP="docs/data/h200_s28 docs/data/h200_s29 docs/data/h200_s30" tools/device_slim.sh on.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  CALL_BUDGET_S=360 exec bash docs/data/h200_s28/calls/call6.sh
fi
set -o pipefail
source tools/device_prelude.sh
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin7
timeout 150 python3 -m pytest -q -m gpu tests/test_fused_xchain.py -k "7-" -rs > $OUT/logs/gpu_xchain.log 2>&1; t gpu_xchain $?
tail -3 $OUT/logs/gpu_xchain.log
finish_call
