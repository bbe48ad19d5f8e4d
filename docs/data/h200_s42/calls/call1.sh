#!/usr/bin/env bash
# Session 42 call 1 (any GPU; about 560 s, `LIMIT=S` for less): the streamed kernels' parity (beyond the paper, built
# in session 42, CPU-tested only), most wanted first.
# 1. The streamed parity tables on the GPU (tests/test_fused_stream_parity.py -m gpu -k tables: p = 31, every key
#    parity takes, FUSED_TC's also as FUSED_DFMA) against the reference at 1e-12.
# 2. The parity sweep at p = 255, 511, 127 and 767 (`sweep-fused run --timing stages` of sweep_plan_stream_parity.json:
#    every candidate validated at the benchmark grid first, timed next to the schedule's own table; no order starts
#    after the budget), applied at 1 %.
# 3. A B B A benches of GEMM, FUSED_TC and FUSED_TC16 at the orders that changed.
# On a GPU other than an H200 the generic fused tables (COMPOSER_SCHEDULE_MACHINE=generic), as the plan was made.
# Carry: .whl .cache (nvrtc_pin9 filled for the plan with the device's NVRTC 13.0 and the pinned 13.5, commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-560}
call_start .cache/nvrtc_pin9 ab prof
timeout 150 python3 -m pytest -v -m gpu -p no:cacheprovider tests/test_fused_stream_parity.py -k tables \
  > "$OUT/logs/stream_parity_tests.log" 2>&1
t stream_parity_tests $?
tail -3 "$OUT/logs/stream_parity_tests.log"
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
# 53 tables at four orders: session 17's 72 streamed tables at p = 127-767 took 223 s (docs/data/h200_s17/call1)
left=$(( LIMIT - 200 - $(elapsed) ))
sweep_apply docs/data/h200_s42/plans/sweep_plan_stream_parity.json 255,511,127,767 $(( left < 280 ? left : 280 )) 0.01 --timing stages
grep -E '^\{' "$OUT/logs/sweep.log" | cut -c1-200
unset COMPOSER_SCHEDULES
B=$OUT/sched
CHANGED=$(applied_orders "$B")
echo "applied at: ${CHANGED:-none}" | tee -a "$OUT/logs/times.txt"
left=$(( LIMIT - 15 - $(elapsed) ))
if [ -n "$CHANGED" ] && [ $left -gt 100 ]; then
  ab_benches "$B" GEMM,FUSED_TC,FUSED_TC16 "$CHANGED" $(( (left - 20) / 4 )) ab
fi
finish_call ab prof sw sched
