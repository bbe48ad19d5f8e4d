#!/usr/bin/env bash
# Session 41 call 4 (any GPU; `LIMIT=S`, default 280 s): call 3 cut to what a session with about 450 s of device time left
# can hold after one machine start. Every variant and table is validated against the reference before it is timed.
# 1. tools/variants_bench.py at p = 511: GEMM against GEMM:parity=on (2 rounds of 3 calls).
# 2. The fused parity sweep at p = 31 (`sweep-fused run --timing stages` of sweep_plan_parity.json), as the time left
#    allows (no apply: a sweep's ratios only).
# 3. tools/variants_bench.py at p = 255 if time is left.
# Carry: .whl .cache (nvrtc_pin9 filled for the plan; commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-280}
call_start .cache/nvrtc_pin9 v sw
timeout 110 python3 tools/variants_bench.py --order 511 --variant GEMM --variant GEMM:parity=on --rounds 2 --calls 3 \
  --out "$OUT/v/p511.json" > "$OUT/logs/v511.log" 2>&1; t v511 $?
tail -4 "$OUT/logs/v511.log"
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
left=$(( LIMIT - 60 - $(elapsed) ))
if [ $left -gt 40 ]; then
  timeout $left python3 -m composer.cli.main sweep-fused run --orders 31 --plan docs/data/h200_s41/plans/sweep_plan_parity.json \
    --out "$OUT/sw" --budget $(( left - 15 )) --timing stages > "$OUT/logs/sweep.log" 2>&1; t sweep $?
  grep -E '^\{' "$OUT/logs/sweep.log" | cut -c1-180
fi
unset COMPOSER_SCHEDULE_MACHINE
left=$(( LIMIT - $(elapsed) ))
if [ $left -gt 35 ]; then
  timeout $(( left - 5 )) python3 tools/variants_bench.py --order 255 --variant GEMM --variant GEMM:parity=on --rounds 2 \
    --calls 3 --out "$OUT/v/p255.json" > "$OUT/logs/v255.log" 2>&1; t v255 $?
  tail -4 "$OUT/logs/v255.log"
fi
finish_call v sw
