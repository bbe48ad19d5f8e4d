# Sourced by docs/data/h200_s6/calls/call5.sh after the prelude (elapsed, t, $OUT): GEMM_FUSED's GPU
# validation on small non-cubic grids at p = 7 ... 127 (every built carrier/fold/flux variant) and at
# the Table S29 size of p = 7 and 511, the CuTe GEMM tests on the changed kernel ABI, then GEMM_FUSED
# interleaved with GEMM and GEMM_CUTE at p = 7, 63, 511 while time is left.
mkdir -p $OUT/gf
timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=5 tests/test_cute_gpu.py \
  "tests/test_gemm_fused_gpu.py::test_gemm_fused_validates_at_every_order" \
  "tests/test_gemm_fused_gpu.py::test_gemm_fused_validates_at_the_table_s29_size" \
  -k "not 255 and not 575 and not 767 and not every_order[511] and not s29_size[127]" \
  > $OUT/logs/gf_tests.log 2>&1; t gf_tests $?
L=$(( 330 - $(elapsed) )); [ $L -gt 40 ] && { timeout $L python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,GEMM_FUSED \
  --orders 7,63,511 --rounds 2 --out $OUT/gf/bench > $OUT/logs/gf_bench.log 2>&1; t gf_bench $?; }
grep -E "passed|failed" $OUT/logs/gf_tests.log | tail -2
grep "^| " $OUT/gf/bench/summary.md 2>/dev/null | cut -d'|' -f2-6 | head -12
