#!/usr/bin/env bash
# Session 30 call 8 (about 480 s on an H200; on any other GPU it records the GPU and stops at once). On an H200:
# session 28's call 6 bounded to 480 s (CALL_BUDGET_S: the p = 15 xyz-cluster sweep and bench, then issue 14's
# `composer bench --paths GEMM,GEMM_FUSED --orders 511,575` as far as the budget reaches).
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5. KEEP="docs/data/h200_s28 docs/data/h200_s29 docs/data/h200_s30" tools/device_slim.sh on.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  CALL_BUDGET_S=480 exec bash docs/data/h200_s28/calls/call6.sh
fi
echo "not an H200 ($GPU): stopping"
