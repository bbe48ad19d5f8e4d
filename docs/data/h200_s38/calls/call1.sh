#!/usr/bin/env bash
# Session 38 call 1 (H200 only; stops at once on another GPU; about 540 s), most wanted first (every step is packed into
# $OUT/results.tgz as it ends):
# 1. Issue 16 at p = 7 and 15 (session 37's pending plan): `sweep-fused run --timing stages` of
#    docs/data/h200_s37/plans/sweep_plan_pair_bricks.json (x pairs on bricks at p = 7, x0.982 for FUSED_TC16 on an
#    H100; the p = 15 cluster tables without vmapP / on bricks), then of docs/data/h200_s38/plans/sweep_plan_descending.json
#    at p = 31 and 127 (`descending`, new this session: on an H100 FUSED_TC16 p = 31 down:z x0.982 and FUSED_TC
#    p = 127 down:x x0.988 in two stage-timed sweeps, losses or ties elsewhere, `docs/data/h100_s38/call1`); both
#    applied at 1 % into $OUT/sched, then A B B A (A shipped, B applied) of GEMM, FUSED_TC, FUSED_TC16 at the orders
#    whose tables changed.
# 2. Session 37's pending H200 items: FUSED_DFMA at p = 7 and 15 on the session-36 tables beside FUSED_TC, then issue
named_bench p767 $left GEMM,GEMM_FUSED 767 2 .cache/build_s22
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 ab bench prof sw2
h200_only
LIMIT=${LIMIT:-540}
sweep_apply docs/data/h200_s37/plans/sweep_plan_pair_bricks.json 7,15 110 0.01 --timing stages
timeout 110 $M sweep-fused run --orders 31,127 --plan docs/data/h200_s38/plans/sweep_plan_descending.json \
  --out "$OUT/sw2" --budget 60 --timing stages > "$OUT/logs/sweep2.log" 2>&1; t sweep2 $?
$M sweep-fused apply "$OUT/sw2/sweep.json" --schedules-dir "$OUT/sched" --min-gain 0.01 \
  > "$OUT/logs/apply2.log" 2>&1; t apply2 $?
cat "$OUT/logs/apply2.log"
grep -E '^\{' "$OUT/logs/sweep2.log" | cut -c1-200
unset COMPOSER_SCHEDULES
B=$OUT/sched
CHANGED=$(for f in "$B"/p0*.toml; do [ -f "$f" ] || continue; cmp -s "$f" "schedules/$(basename "$f")" || basename "$f" .toml; done \
  | sed 's/^p0*//' | paste -sd, -)
echo "applied at: ${CHANGED:-none}" | tee -a "$OUT/logs/times.txt"
if [ -n "$CHANGED" ]; then
  for f in schedules/p0*.toml; do [ -f "$B/$(basename "$f")" ] || cp "$f" "$B/"; done
  ab_benches "$B" GEMM,FUSED_TC,FUSED_TC16 "$CHANGED" 100 ab
fi
left=$(( LIMIT - 200 - $(elapsed) ))
if [ $left -gt 60 ]; then
  named_bench dfma 100 FUSED_TC,FUSED_DFMA 7,15 3
fi
left=$(( LIMIT - 40 - $(elapsed) ))
if [ $left -gt 150 ]; then
  named_bench p767 $left GEMM,GEMM_FUSED 767 2 .cache/build_s22
fi
left=$(( LIMIT - $(elapsed) ))
if [ -n "${CHANGED:-}" ] && [ $left -gt 30 ]; then
  COMPOSER_SCHEDULES=$B timeout $left $M profile --paths FUSED_TC,FUSED_TC16 --orders "$CHANGED" --out "$OUT/prof/applied" \
    > "$OUT/logs/prof_applied.log" 2>&1; t prof_applied $?
fi
finish_call ab bench prof sw sw2 sched
