#!/usr/bin/env bash
# Session 34 call 1 (any GPU). On an H200 (about 450 s): issue 15's within-H200 shape transfer,
# docs/data/h200_s33/calls/call1.sh (h200_s31/calls/call2.sh with SKIP_CALL5=1). On any other GPU (the device lends
# H100s to calls that name nvidia-h200; about 370 s): docs/data/h200_s33/calls/call8.sh, the carveout GPU tests, the
# causal L1 test of FUSED p = 7 linked at 71 %, the carveout family swept at p = 7 and 15, applied, A B B A, ncu.
# Carry: .whl .cache.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then exec bash docs/data/h200_s33/calls/call1.sh; fi
exec bash docs/data/h200_s33/calls/call8.sh
