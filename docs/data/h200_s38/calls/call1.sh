#!/usr/bin/env bash
# Session 38 call 1 (H200 only; stops at once on another GPU; about 540 s), most wanted first (every step is packed into
# $OUT/results.tgz as it ends):
# 1. Issue 16, the block order across kernels (`descending`, new this session): `composer sweep-fused run --timing
#    stages` (each tendency call followed by the RK update, as `composer bench` runs them) of
#    docs/data/h200_s38/plans/sweep_plan_descending.json at p = 7, 31, 63, 127 (`sweep-fused check --orders
#    7,31,63,127 --subset descending --only '^FUSED_TC' --pin-nvrtc`: every set of each FUSED_TC / FUSED_TC16 table's
#    kernels taking their blocks downwards), applied at 1 % into $OUT/sched, then A B B A (A shipped, B applied) of
#    GEMM, FUSED_TC, FUSED_TC16 at the orders whose tables changed.
# 2. Session 37's pending H200 items: FUSED_DFMA at p = 7 and 15 on the session-36 tables beside FUSED_TC, then issue
#    14's `composer bench --paths GEMM,GEMM_FUSED --orders 767 --rounds 2` (COMPOSER_BUILD_DIR=.cache/build_s22).
# 3. ncu of the applied tables, with the time left under LIMIT (default 540 s).
# Carry: .whl .cache (nvrtc_pin9 with the plan's NVRTC 13.5 kernels, build_s22, commit).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 ab bench prof
h200_only
LIMIT=${LIMIT:-540}
sweep_apply docs/data/h200_s38/plans/sweep_plan_descending.json 7,31,63,127 150 0.01 --timing stages
B=${COMPOSER_SCHEDULES:-}
unset COMPOSER_SCHEDULES
if [ -n "$B" ]; then
  # the orders whose tables the apply changed (their files differ from the shipped ones)
  CHANGED=$(for f in "$B"/p0*.toml; do cmp -s "$f" "schedules/$(basename "$f")" || basename "$f" .toml; done \
    | sed 's/^p0*//' | paste -sd, -)
  echo "applied at: ${CHANGED:-none}" | tee -a "$OUT/logs/times.txt"
  [ -n "$CHANGED" ] && ab_benches "$B" GEMM,FUSED_TC,FUSED_TC16 "$CHANGED" 100 ab
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
finish_call ab bench prof sw sched
