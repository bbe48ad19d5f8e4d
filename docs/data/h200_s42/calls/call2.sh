#!/usr/bin/env bash
# Session 42 call 2 (any GPU; `LIMIT=S`, default 280 s): the parity work of sessions 41 and 42 cut to what a session with
# about 450 s of device time left can hold after one machine start; ratios only (no table applied). Every variant and
# table is validated against the reference before it is timed.
# 1. The streamed parity sweep of FUSED_TC16 alone (sweep_plan_stream_parity_tc16.json: the schedule's table, the same
#    table pinned, and its parity candidates) at p = 255, then p = 511 as the time allows.
# 2. tools/variants_bench.py at p = 511: GEMM against GEMM:parity=on (2 rounds of 3 calls), if time is left.
# Carry: .whl .cache (nvrtc_pin9 filled for the plan; commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-280}
call_start .cache/nvrtc_pin9 v sw
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
left=$(( LIMIT - 110 - $(elapsed) ))
timeout $(( left + 60 )) python3 -m composer.cli.main sweep-fused run --orders 255,511 \
  --plan docs/data/h200_s42/plans/sweep_plan_stream_parity_tc16.json --out "$OUT/sw" --budget $(( left > 20 ? left : 20 )) \
  --timing stages > "$OUT/logs/sweep.log" 2>&1; t sweep $?
grep -E '^\{' "$OUT/logs/sweep.log" | cut -c1-180
unset COMPOSER_SCHEDULE_MACHINE
left=$(( LIMIT - $(elapsed) ))
if [ $left -gt 60 ]; then
  timeout $(( left - 5 )) python3 tools/variants_bench.py --order 511 --variant GEMM --variant GEMM:parity=on --rounds 2 \
    --calls 3 --out "$OUT/v/p511.json" > "$OUT/logs/v511.log" 2>&1; t v511 $?
  tail -4 "$OUT/logs/v511.log"
fi
finish_call v sw
