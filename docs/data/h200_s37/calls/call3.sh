#!/usr/bin/env bash
# Session 37 call 3 (H200 only, about 360 s; the session's last device time after call 2 ran on an H100): call 1's
# items reordered for what the H100 could not settle: FUSED_DFMA at p = 7 and 15 on the session-36 tables beside
# FUSED_TC, issue 14's `composer bench --paths GEMM,GEMM_FUSED --orders 767 --rounds 2` with the overlap shipped, then
# (time left) the pair-bricks / face-links sweep of docs/data/h200_s37/plans/sweep_plan_pair_bricks.json at p = 7, not
# applied (one timing per table; the H100 measured x0.982 for FUSED_TC16's pairs on bricks).
# Carry: .whl .cache (nvrtc_pin9, build_s22, commit).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 bench
h200_only
LIMIT=${LIMIT:-360}
timeout 90 $M bench --paths FUSED_TC,FUSED_DFMA --orders 7,15 --rounds 3 --out "$OUT/bench/dfma" \
  > "$OUT/logs/bench_dfma.log" 2>&1; t bench_dfma $?
grep -E "^\| FUSED" "$OUT/logs/bench_dfma.log" | cut -d'|' -f2,3,6,10
left=$(( LIMIT - 50 - $(elapsed) ))
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout $left $M bench --paths GEMM,GEMM_FUSED --orders 767 --rounds 2 \
  --out "$OUT/bench/p767" > "$OUT/logs/bench_767.log" 2>&1; t bench_767 $?
grep -E "^\| GEMM" "$OUT/logs/bench_767.log" | cut -d'|' -f2,3,6,10
left=$(( LIMIT - 10 - $(elapsed) ))
if [ $left -gt 30 ]; then
  mkdir -p "$OUT/sw"
  timeout $left $M sweep-fused run --orders 7 --plan docs/data/h200_s37/plans/sweep_plan_pair_bricks.json \
    --out "$OUT/sw" --budget $(( left - 10 )) > "$OUT/logs/sweep.log" 2>&1; t sweep $?
fi
finish_call bench sw
