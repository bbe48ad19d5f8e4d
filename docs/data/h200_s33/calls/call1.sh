#!/usr/bin/env bash
# Session 33 call 1 (any GPU). On an H200 (about 450 s): issue 15's within-H200 shape transfer, the first part of
# docs/data/h200_s31/calls/call2.sh (ncu of FUSED_TC on the NVRTC 13.5 twins' source tables, fit, both twins predicted
# and their sha256 logged before either runs, bench, score); session 32's call 5 follows as call 2 on the warm machine.
# On any other GPU (the device may lend an H100 to a call that names nvidia-h200, about 140-230 s):
# docs/data/h200_s32/calls/call4.sh (the face links with the compiler barrier against the H100's overlay at p = 7,
# ncu, the face-links GPU tests).
# Carry: .whl .cache (twins135, build_twins135, twins135_88, build_twins135_88, nvrtc_pin8, nvrtc_pin9,
# s32_links_h100, commit).
set -o pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then SKIP_CALL5=1 exec bash docs/data/h200_s31/calls/call2.sh; fi
# elsewhere: nothing left to run (session 32's call 4 and call 2's H100 branch ran: docs/data/h100_s33 calls 1, 2)
echo "not an H200 ($GPU): stopping"
