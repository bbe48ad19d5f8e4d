#!/usr/bin/env bash
# Session 43 call 4 (any GPU; `LIMIT=S`, default 250 s): call 3 cut to its first two steps for a session with
# under 500 s of device time left (four refused starts after call 1): GEMM_FUSED:parity=on's GPU tests on small
# grids (each carrier, p = 7, 15, 63), then tools/variants_bench.py at p = 511: GEMM, GEMM:parity=on, GEMM_FUSED
# and GEMM_FUSED:parity=on (2 rounds of 3 calls, each validated first), bounded by what LIMIT leaves.
# Carry: .whl .cache (build_gfp as in call3.sh; commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-250}
call_start .cache/nvrtc_pin9 v
export COMPOSER_BUILD_DIR=$PWD/.cache/build_gfp
timeout 80 python3 -m pytest -v -s -m gpu -p no:cacheprovider tests/test_parity_gpu.py \
  -k "gemm_fused_parity and not 255" > "$OUT/logs/parity_tests.log" 2>&1
t parity_tests $?
grep -E "PASSED|FAILED|ERROR|SKIPPED|max.diff" "$OUT/logs/parity_tests.log" | cut -c1-170
tail -1 "$OUT/logs/parity_tests.log"
left=$(( LIMIT - 10 - $(elapsed) ))
timeout $(( left > 30 ? left : 30 )) python3 tools/variants_bench.py --order 511 --variant GEMM --variant GEMM:parity=on \
  --variant GEMM_FUSED --variant GEMM_FUSED:parity=on --rounds 2 --calls 3 --out "$OUT/v/p511.json" \
  > "$OUT/logs/v511.log" 2>&1
t v511 $?
tail -6 "$OUT/logs/v511.log"
finish_call v
