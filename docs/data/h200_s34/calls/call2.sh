#!/usr/bin/env bash
# Session 34 call 2 (about 300 s on an H200): issue 14's figure on the H200, never run
# there since session 26 applied the overlapped volume flux: docs/data/h200_s26/calls/call3.sh, that is
# `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3` on the shipped schedules, then
# p = 767's GEMM_FUSED unsplit and overlapped on 32 SMs against GEMM (tools/variants_bench.py, interleaved).
# On any other GPU (the device lends H100s to calls that name nvidia-h200): docs/data/h200_s33/calls/call8.sh, the
# carveout call (about 370 s on an H100).
# Carry: .whl .cache (build_s22, nvrtc_pin9, s33_fused_cv71, commit).
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then exec bash docs/data/h200_s26/calls/call3.sh; fi
exec bash docs/data/h200_s33/calls/call8.sh
