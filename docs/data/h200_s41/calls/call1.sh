#!/usr/bin/env bash
# Session 41 call 1 (any GPU; about 500 s, `LIMIT=S` for less): the parity decomposition (composer.parity, new):
# GEMM with `parity` (two half-size cuBLAS GEMMs per direction on the split fluxes, half the multiply-adds).
# 1. Its GPU tests (tests/test_parity_gpu.py): the two parity kernels against NumPy on ragged sizes, the path against
#    the reference on the point-varying input (small non-cubic grids, Table S29 sizes at p = 7, 63, 255).
# 2. tools/variants_bench.py at p = 255, 511, 127, 63, 15: GEMM against GEMM:parity=on (and GEMM_FUSED as shipped at
#    511), each variant validated first, 3 rounds of 3 calls interleaved on one resident problem.
# 3. ncu of GEMM with parity at p = 511 if time is left (`composer profile`).
# Carry: .whl .cache (nvrtc_pin9, build_s22 for GEMM_FUSED, commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-500}
call_start .cache/nvrtc_pin9 v prof
timeout 220 python3 -m pytest -v -m gpu -p no:cacheprovider tests/test_parity_gpu.py > "$OUT/logs/parity_tests.log" 2>&1
t parity_tests $?
tail -4 "$OUT/logs/parity_tests.log"
grep -h "max|diff|" "$OUT/logs/parity_tests.log"
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s22
for p in 255 511 127 63 15; do
  left=$(( LIMIT - $(elapsed) ))
  [ $left -gt 40 ] || break
  extra=()
  [[ $p == 511 ]] && extra=(--variant GEMM_FUSED)
  timeout $(( left < 150 ? left - 10 : 150 )) python3 tools/variants_bench.py --order $p --variant GEMM \
    --variant GEMM:parity=on "${extra[@]}" --rounds 3 --calls 3 --out "$OUT/v/p$p.json" > "$OUT/logs/v$p.log" 2>&1
  t "v$p" $?
  tail -5 "$OUT/logs/v$p.log"
done
left=$(( LIMIT - $(elapsed) ))
if [ $left -gt 100 ]; then
  timeout $(( left - 20 )) $M profile --paths GEMM --orders 511 --option GEMM.parity=on --out "$OUT/prof/parity" \
    > "$OUT/logs/prof_parity.log" 2>&1; t prof_parity $?
  tail -15 "$OUT/logs/prof_parity.log"
fi
finish_call v prof
