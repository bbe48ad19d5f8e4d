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
#    14's `composer bench --paths GEMM,GEMM_FUSED --orders 767 --rounds 2` (COMPOSER_BUILD_DIR=.cache/build_s22).
# 3. ncu of the applied tables, with the time left under LIMIT (default 540 s).
# Carry: .whl .cache (nvrtc_pin9 with both plans' NVRTC 13.5 kernels, build_s22, commit).
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
  timeout 100 $M bench --paths FUSED_TC,FUSED_DFMA --orders 7,15 --rounds 3 --out "$OUT/bench/dfma" \
    > "$OUT/logs/bench_dfma.log" 2>&1; t bench_dfma $?
  grep -E "^\| FUSED" "$OUT/logs/bench_dfma.log" | cut -d'|' -f2,3,6,10
fi
left=$(( LIMIT - 40 - $(elapsed) ))
if [ $left -gt 150 ]; then
  COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout $left $M bench --paths GEMM,GEMM_FUSED --orders 767 --rounds 2 \
    --out "$OUT/bench/p767" > "$OUT/logs/bench_767.log" 2>&1; t bench_767 $?
  grep -E "^\| GEMM" "$OUT/logs/bench_767.log" | cut -d'|' -f2,3,6,10
fi
left=$(( LIMIT - $(elapsed) ))
if [ -n "${CHANGED:-}" ] && [ $left -gt 30 ]; then
  COMPOSER_SCHEDULES=$B timeout $left $M profile --paths FUSED_TC,FUSED_TC16 --orders "$CHANGED" --out "$OUT/prof/applied" \
    > "$OUT/logs/prof_applied.log" 2>&1; t prof_applied $?
fi
finish_call ab bench prof sw sw2 sched
