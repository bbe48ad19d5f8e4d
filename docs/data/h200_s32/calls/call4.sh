#!/usr/bin/env bash
# Session 32 call 4 (any GPU; about 140-230 s; written for the device time left in session 32, which then could start no
# machine). Issue 16 at p = 7: the face fluxes without vmapP (`exterior_maps = false`) after call 2, now with the
# compiler barrier between the face directions' loops (FUSED_TC p = 7 back to 32 registers, FUSED to 40). Cubins in
# .cache/nvrtc_pin9 (NVRTC 13.5).
# On an H200: the generic tables' face_links family at p = 7 (docs/data/h200_s32/plans/sweep_plan_face_links.json)
# swept and applied at 1 % into $OUT/sched. Elsewhere (an H100): B is the H100's overlay tables plus
# exterior_maps = false (.cache/s32_links_h100, docs/data/h200_s32/calls/links_schedules.py).
# Then alternating benches A B B A of FUSED, FUSED_TC, FUSED_TC16 at p = 7 (A the shipped tables) and, with the time
# left, ncu of FUSED_TC at p = 7 on B (DRAM bytes) and the GPU tests of tests/test_fused_face_links.py (the sources with
# the barrier have not run on a GPU yet).
# Carry: .whl .cache/nvrtc_pin9 .cache/s32_links_h100 .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ab $OUT/prof
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin9
M="python3 -m composer.cli.main"
ORDERS=7
if [[ "$GPU" == *H200* ]]; then
  sweep_apply docs/data/h200_s32/plans/sweep_plan_face_links.json 7 60 0.01
  B=${COMPOSER_SCHEDULES:-}
  unset COMPOSER_SCHEDULES
else
  B=$PWD/.cache/s32_links_h100
fi
if [ -n "$B" ]; then
  ab_benches $B FUSED,FUSED_TC,FUSED_TC16 $ORDERS 60
  tar -C "$OUT" -czf "$OUT/ab.tgz" logs ab 2>/dev/null  # the benches back even if the device time runs out below
  [ $(elapsed) -lt 110 ] && COMPOSER_SCHEDULES=$B timeout 45 $M profile --paths FUSED_TC --orders 7 --out $OUT/prof/links \
    > $OUT/logs/prof_links.log 2>&1; t prof_links $?
  grep -h -iE 'dram|FUSED' $OUT/logs/prof_links.log | head -20
fi
left=$(( 230 - $(elapsed) ))  # the barrier's sources against the reference (the p = 7 and 15 small grids first)
if [ $left -gt 40 ]; then
  timeout $left python3 -m pytest -q -m gpu tests/test_fused_face_links.py -rs > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
  tail -3 $OUT/logs/gpu_tests.log
fi
finish_call ab prof sw sched
