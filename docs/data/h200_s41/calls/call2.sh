#!/usr/bin/env bash
# Session 41 call 2 (any GPU; about 540 s, `LIMIT=S` for less): the fused kernels' `parity` key (new: each tensor-core
# contraction over the even and odd parts of the tile's lines, half the k-steps), issue 16 at p = 31 and 63 (their xy
# kernels bound by L1/shared or by latency) and 15.
# 1. `sweep-fused run --timing stages` of docs/data/h200_s41/plans/sweep_plan_parity.json at p = 31, 63 (every
#    candidate validated against the reference first; FUSED_DFMA's twin of each FUSED_TC table too), then p = 15,
#    applied at 1 % into $OUT/sched.
# 2. A B B A benches (A shipped, B applied) of GEMM, FUSED_TC, FUSED_TC16 at the orders whose tables changed.
# 3. ncu of the applied tables if time is left.
# On a GPU other than an H200 the generic tables (COMPOSER_SCHEDULE_MACHINE=generic), as the plan was made.
# Carry: .whl .cache (nvrtc_pin9 filled for the plan and the shipped tables at 15, 31, 63; commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-540}
call_start .cache/nvrtc_pin9 ab prof
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
PLAN=docs/data/h200_s41/plans/sweep_plan_parity.json
sweep_apply $PLAN 31,63 200 0.01 --timing stages
grep -E '^\{' "$OUT/logs/sweep.log" | cut -c1-200
cat "$OUT/logs/apply.log"
left=$(( LIMIT - 260 - $(elapsed) ))
if [ $left -gt 40 ]; then
  mkdir -p "$OUT/sw15"
  timeout $left $M sweep-fused run --orders 15 --plan $PLAN --out "$OUT/sw15" --budget $(( left - 20 )) --timing stages \
    > "$OUT/logs/sweep15.log" 2>&1; t sweep15 $?
  $M sweep-fused apply "$OUT/sw15/sweep.json" --schedules-dir "$OUT/sched" --min-gain 0.01 > "$OUT/logs/apply15.log" 2>&1
  t apply15 $?
  cat "$OUT/logs/apply15.log"
fi
unset COMPOSER_SCHEDULES
B=$OUT/sched
CHANGED=$(applied_orders "$B")
echo "applied at: ${CHANGED:-none}" | tee -a "$OUT/logs/times.txt"
if [ -n "$CHANGED" ]; then
  ab_benches "$B" GEMM,FUSED_TC,FUSED_TC16 "$CHANGED" 55 ab
  left=$(( LIMIT - $(elapsed) ))
  if [ $left -gt 40 ]; then
    COMPOSER_SCHEDULES=$B timeout $(( left - 10 )) $M profile --paths FUSED_TC,FUSED_TC16 --orders "$CHANGED" \
      --out "$OUT/prof/applied" > "$OUT/logs/prof_applied.log" 2>&1; t prof_applied $?
  fi
fi
finish_call ab prof sw sw15 sched
