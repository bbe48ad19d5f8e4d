#!/usr/bin/env bash
# Session 31 call 1 (needs_h200: p = 1023 does not fit an H100's 78 GiB; about 300 s). Issue 14: GEMM_FUSED at p = 1023
# with the flux formed in the mainloop (`flux = "staged"`, three volume arrays fewer: about 104 GiB with the z carrier
# and the fold, 112 GiB with the y carrier), the form the issue names for this order, never run at p = 1023 (session 8
# ran the array flux, 128.3 GiB, 171469 us); beside it the shipped setting and its volume flux overlapped on 32 SMs,
# all four validated against one full NumPy reference on the point-varying input, then timed interleaved on one
# resident problem (tools/variants_bench.py). Build: `composer build --arch sm_90 --paths GEMM_FUSED --orders 1023
# --fused-variants all --out .cache/build_1023`. Carry: .whl .cache/commit .cache/build_1023.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/v
record_gpu
h200_only
free -g >> $OUT/logs/times.txt
export COMPOSER_BUILD_DIR=$PWD/.cache/build_1023
timeout 520 python3 tools/variants_bench.py --order 1023 --variant GEMM_FUSED --variant 'GEMM_FUSED:flux=staged' \
  --variant 'GEMM_FUSED:overlap_sms=32,overlap_first=x' --variant 'GEMM_FUSED:carrier=y,fold=false,flux=staged' \
  --rounds 2 --calls 3 --out $OUT/v/p1023.json > $OUT/logs/v1023.log 2>&1; t v1023 $?
tail -12 $OUT/logs/v1023.log
finish_call v
