#!/usr/bin/env bash
# Session 32 call 5 (H200 only; about 500 s; stops at once on another GPU). Issue 16 at p = 7 and 15 on the H200, the
# H100's findings of sessions 28-32 in one sweep: `composer sweep-fused run` of
# docs/data/h200_s32/plans/sweep_plan_face_links_h100.json (planned with `--machine h100_sxm`: on an H200 its "shipped"
# row is the generic table, its "base" the H100's overlay table: p = 7 bricks without vmapM, p = 15 the xyz kernel over
# a cluster of two without vmapM; each also without vmapP, `exterior_maps = false`), applied at 1 % into $OUT/sched;
# alternating benches A B B A (A the shipped tables, B $OUT/sched) of GEMM, FUSED, FUSED_TC, FUSED_TC16 at p = 7 and 15
# (GEMM: issue 16's targets are read interleaved with it); ncu of FUSED_TC and FUSED_TC16 at p = 7 and 15 on B.
# Carry: .whl .cache/nvrtc_pin9 .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ab $OUT/prof
record_gpu
h200_only
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin9
M="python3 -m composer.cli.main"
O=${ORDERS:-7,15}  # ORDERS, PLAN: session 33
sweep_apply ${PLAN:-docs/data/h200_s32/plans/sweep_plan_face_links_h100.json} $O 150 0.01
B=${COMPOSER_SCHEDULES:-}
unset COMPOSER_SCHEDULES
if [ -n "$B" ]; then
  ab_benches $B GEMM,FUSED,FUSED_TC,FUSED_TC16 $O 80
  COMPOSER_SCHEDULES=$B timeout 80 $M profile --paths FUSED_TC,FUSED_TC16 --orders $O --out $OUT/prof/applied \
    > $OUT/logs/prof_applied.log 2>&1; t prof_applied $?
fi
finish_call ab prof sw sched
