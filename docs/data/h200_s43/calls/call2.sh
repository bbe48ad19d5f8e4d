#!/usr/bin/env bash
# Session 43 call 2 (the H200 wanted; `LIMIT=S`, default 560 s): call 1 ran on an H100 (docs/data/h100_s43/call1:
# every parity GPU test passed but the flux-split kernel's exact-equality check, since relaxed to the FMA
# contraction's ulp; FUSED_TC16's streamed parity 0.848 of its shipped table at p = 511, GEMM:parity=on 0.737 of GEMM).
# 1. tests/test_parity_gpu.py -k volume_flux_parity (the relaxed check).
# 2. FUSED_TC16's streamed parity sweep (sweep_plan_stream_parity_tc16.json) at p = 511 and 767, applied at 1 %.
# 3. tools/variants_bench.py at p = 511: GEMM against GEMM:parity=on (2 rounds of 3 calls).
# 4. A B B A benches of GEMM and FUSED_TC16 where a table changed, as the time allows.
# On a GPU other than an H200 the generic fused tables (COMPOSER_SCHEDULE_MACHINE=generic), as the plan was made.
# Carry: .whl .cache (nvrtc_pin9 filled for the plan; commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-560}
call_start .cache/nvrtc_pin9 v sw sched ab
timeout 60 python3 -m pytest -v -m gpu -p no:cacheprovider tests/test_parity_gpu.py -k volume_flux_parity \
  > "$OUT/logs/parity_tests.log" 2>&1
t parity_tests $?
tail -2 "$OUT/logs/parity_tests.log"
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
left=$(( LIMIT - 160 - $(elapsed) ))
sweep_apply docs/data/h200_s42/plans/sweep_plan_stream_parity_tc16.json 511,767 $(( left < 200 ? (left > 30 ? left : 30) : 200 )) \
  0.01 --timing stages
grep -E '^\{' "$OUT/logs/sweep.log" | cut -c1-200
unset COMPOSER_SCHEDULES COMPOSER_SCHEDULE_MACHINE
left=$(( LIMIT - 10 - $(elapsed) ))
if [ $left -gt 70 ]; then
  timeout $(( left < 90 ? left : 90 )) python3 tools/variants_bench.py --order 511 --variant GEMM --variant GEMM:parity=on \
    --rounds 2 --calls 3 --out "$OUT/v/p511.json" > "$OUT/logs/v511.log" 2>&1
  t v511 $?
  tail -3 "$OUT/logs/v511.log"
fi
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
ab_where_applied GEMM,FUSED_TC16
finish_call v sw sched ab
