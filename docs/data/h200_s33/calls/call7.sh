#!/usr/bin/env bash
# Session 33 call 7 (any GPU; about 150 s): the L1/shared split of the p = 7 kernels (the `carveout` option of the
# fused paths). The p = 7 kernels are bound by the L2 and its partition link (ncu, sessions 27-33); at the default
# split FUSED_TC's eight 256-thread blocks take 196 KB of shared memory and leave 60 KB of L1 of 256 (sm_90). GPU tests
# of the option (tests/test_fused_carveout.py), then tools/variants_bench.py at p = 7: FUSED_TC at the default split,
# at 64 % (164 KB: 7 blocks, 92 KB of L1) and 50 % (132 KB: 5 blocks, 124 KB of L1), FUSED at the default and 50 %
# (its 128-thread blocks: 9 → 7), each validated first, interleaved; ncu of FUSED_TC at 64 % with the time left.
# Carry: .whl .cache (nvrtc_pin9).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 v prof
timeout 60 python3 -m pytest -q -m gpu tests/test_fused_carveout.py -rs > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -2 $OUT/logs/gpu_tests.log
timeout 110 python3 tools/variants_bench.py --order 7 --variant FUSED_TC --variant FUSED_TC:carveout=64 \
  --variant FUSED_TC:carveout=50 --variant FUSED --variant FUSED:carveout=50 --rounds 3 --calls 3 \
  --out $OUT/v/p7.json > $OUT/logs/v7.log 2>&1; t v7 $?
tail -12 $OUT/logs/v7.log
left=$(( 170 - $(elapsed) ))
[ $left -gt 25 ] && timeout $left $M profile --paths FUSED_TC --orders 7 \
  --option FUSED_TC.carveout=64 --out $OUT/prof/c64 > $OUT/logs/prof_c64.log 2>&1; t prof_c64 $?
grep -h "fused_tc_p7" $OUT/logs/prof_c64.log
finish_call v prof
