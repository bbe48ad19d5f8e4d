#!/usr/bin/env bash
# Session 33 call 8 (any GPU; about 300 s, 370 on an H100; written after the session's device time ran out): the L1/shared split of
# the p = 7 and 15 kernels, issue 16. 1. The GPU tests of the carveout option and key (tests/test_fused_carveout.py).
# 2. `composer sweep-fused run` of the carveout family at p = 7 and 15 (each box table at preferred carveouts of 71, 57
# and 43 %: 164, 132 and 100 KB of shared memory, 92, 124 and 156 KB of L1 on sm_90; the kernels' sources unchanged),
# docs/data/h200_s33/plans/sweep_plan_carveout_h200.json on an H200 (the generic tables),
# sweep_plan_carveout_h100_sxm.json elsewhere (the H100's overlay), applied at 1 % into $OUT/sched; then alternating
# benches A B B A (A the shipped tables, B $OUT/sched) of FUSED, FUSED_TC, FUSED_TC16 at p = 7, 15 and ncu of the
# applied FUSED_TC at p = 7 (L2 read bytes against the overlay's 2.8 GB on an H100, session 33 call 4).
# Before the sweep, on a GPU other than an H200: FUSED p = 7 linked at 71 % (.cache/s33_fused_cv71, written by
# docs/data/h200_s33/calls/fused_cv71_schedules.py) against the overlay, A B B A: does the split the driver gave FUSED
# with vmapP take back the 3 % the links cost it (call 4: L1 hit rate 26.6 → 23.2 % at 164 → 196 KB)?
# Carry: .whl .cache (nvrtc_pin9 holds every candidate's NVRTC 13.5 CUBIN; s33_fused_cv71).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 ab prof
timeout 60 python3 -m pytest -q -m gpu tests/test_fused_carveout.py -rs > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -2 $OUT/logs/gpu_tests.log
[[ "$GPU" != *H200* ]] && ab_benches $PWD/.cache/s33_fused_cv71 FUSED 7 60 ab_fused_cv71
PLAN=docs/data/h200_s33/plans/sweep_plan_carveout_h100_sxm.json
[[ "$GPU" == *H200* ]] && PLAN=docs/data/h200_s33/plans/sweep_plan_carveout_h200.json
sweep_apply $PLAN 7,15 150 0.01
B=${COMPOSER_SCHEDULES:-}
unset COMPOSER_SCHEDULES
if [ -n "$B" ]; then
  ab_benches $B FUSED,FUSED_TC,FUSED_TC16 7,15 60
  COMPOSER_SCHEDULES=$B timeout 45 $M profile --paths FUSED_TC --orders 7 --out $OUT/prof/applied \
    > $OUT/logs/prof_applied.log 2>&1; t prof_applied $?
  grep -h "fused_tc_p7" $OUT/logs/prof_applied.log
fi
finish_call ab ab_fused_cv71 prof sw sched
