#!/usr/bin/env bash
# Session 34 call 3 (about 260 s on an H200; its first run, on an H100, ran docs/data/h200_s33/calls/call8.sh, the
# carveout call; now it stops at once on another GPU): issue 16 at p = 7 on the generic tables.
# 1. `composer sweep-fused run` of docs/data/h200_s33/plans/sweep_plan_face_links_h100.json at p = 7 (call 2's sweep
#    had FUSED_TC linked at 424.2 against 431.2 µs shipped, FUSED_TC16 x-pairs without vmapP at 430.3 against 442.7,
#    but applied nothing: the script passed 1 for 1 % to a fraction), applied at 1 % into $OUT/sched.
# 2. Alternating benches A B B A (A the shipped tables, B $OUT/sched) of GEMM, FUSED, FUSED_TC, FUSED_TC16 at p = 7.
# 3. ncu of the applied FUSED_TC and FUSED_TC16 at p = 7 with the time left (about 200 s in all). The carveout step
#    planned here was dropped after this call's first run landed on an H100 (docs/data/h100_s34/call1: every carveout
#    below the driver's split lost or tied there).
# AB_PATHS (default GEMM,FUSED,FUSED_TC,FUSED_TC16) and BUDGET (seconds, default 200) shorten it. If B wins, apply
# its p = 7 table with `composer sweep-fused apply <call>/sw/sweep.json --schedules-dir schedules --min-gain 0.01`
# and update the tests that pin the shipped p = 7 sources and use its FUSED_TC table as the plain form.
# Carry: .whl .cache (nvrtc_pin9, commit).
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
[[ "$GPU" == *H200* ]] || { echo "not an H200 ($GPU): stopping (call 8 ran on an H100 as this call's first run)"; exit 0; }
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 ab prof
sweep_apply docs/data/h200_s33/plans/sweep_plan_face_links_h100.json 7 100 0.01
B=${COMPOSER_SCHEDULES:-}
unset COMPOSER_SCHEDULES
[ -n "$B" ] && ab_benches $B ${AB_PATHS:-GEMM,FUSED,FUSED_TC,FUSED_TC16} 7 80
left=$(( ${BUDGET:-200} - $(elapsed) ))
[ $left -gt 30 ] && COMPOSER_SCHEDULES=${B:-} timeout $left $M profile --paths FUSED_TC,FUSED_TC16 --orders 7 \
  --out $OUT/prof/applied > $OUT/logs/prof_applied.log 2>&1; t prof_applied $?
grep -h "fused_tc" $OUT/logs/prof_applied.log | cut -c1-170
finish_call ab prof sw sched
