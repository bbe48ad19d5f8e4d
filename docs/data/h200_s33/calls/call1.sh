#!/usr/bin/env bash
# Session 33 call 1 (any GPU; about 500 s on an H200, 140-230 s elsewhere). Session 32's two open calls behind one
# start: on an H200, docs/data/h200_s32/calls/call5.sh (issue 16 at p = 7, 15: the H100's findings of sessions 28-32
# swept against the generic tables, applied at 1 %, A B B A benches with GEMM, ncu); on any other GPU (the device
# may lend an H100 to a call that names nvidia-h200), docs/data/h200_s32/calls/call4.sh (the face links with the
# compiler barrier against the H100's overlay at p = 7, ncu, the face-links GPU tests).
# Carry: .whl .cache/nvrtc_pin9 .cache/s32_links_h100 .cache/commit.
set -o pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then exec bash docs/data/h200_s32/calls/call5.sh; fi
exec bash docs/data/h200_s32/calls/call4.sh
