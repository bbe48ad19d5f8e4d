#!/usr/bin/env bash
# Session 34 call 4 (H200 only; about 500 s; stops at once on another GPU): calls 3 and 2 in one start, for a session
# whose device time allows one H200 (a start costs about 100 s of it, a refused one about 95 s).
# 1. call3.sh: the face-links plan swept at p = 7 against the generic tables, applied at 1 %, A B B A with GEMM,
#    ncu; its results.tgz kept as results_p7.tgz.
# 2. call2.sh: issue 14's `composer bench` of GEMM, GEMM_CUTE, GEMM_FUSED at p = 511 and 575, then p = 767's overlap
#    on 32 SMs against GEMM (results.tgz).
# Carry: .whl .cache (nvrtc_pin9, build_s22, commit).
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
[[ "$GPU" == *H200* ]] || { echo "not an H200 ($GPU): stopping"; exit 0; }
BUDGET=${BUDGET:-200} bash docs/data/h200_s34/calls/call3.sh
mv -f "$OUT/results.tgz" "$OUT/results_p7.tgz"
rm -rf "${OUT:?}/logs"
bash docs/data/h200_s34/calls/call2.sh
