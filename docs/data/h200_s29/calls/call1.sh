#!/usr/bin/env bash
# Session 29 call 1 (any GPU, at most about 330 s): the device lent H100s to every start of sessions 27 and 28, so a
# start is spent on whichever GPU comes. On an H200: session 28's call 6 (issue 16's p = 15 xyz cluster sweep, the
# bench at 15, issue 14's `composer bench --paths GEMM,GEMM_FUSED --orders 511,575`). On any other GPU: session
# 28's call 14 (issue 16's p = 31 xyz kernel over a cluster of 4 at 1024 threads), which needs no H200.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5.
# KEEP="docs/data/h200_s28 docs/data/h200_s29" tools/device_slim.sh on.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  CALL_BUDGET_S=560 exec bash docs/data/h200_s28/calls/call6.sh
else
  exec bash docs/data/h200_s28/calls/call14.sh
fi
