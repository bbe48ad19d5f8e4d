#!/usr/bin/env bash
# Session 32 call 4 (any GPU; about 140 s): call 3 cut to the device time left. Issue 16 at p = 7: the face fluxes without vmapP (`exterior_maps = false`)
# after call 2, now with the compiler barrier between the face directions' loops (FUSED_TC p = 7 back to 32
# registers, FUSED to 40). Cubins in .cache/nvrtc_pin9 (NVRTC 13.5).
# On an H200: call 2's sweep of the generic tables' face_links family (p = 7, 15), applied at 1 % into $OUT/sched,
# then alternating benches A B B A of FUSED, FUSED_TC, FUSED_TC16 at p = 7, 15, then ncu of FUSED_TC at p = 7 on both
# schedule sets.
# Elsewhere (an H100): the alternating benches at p = 7 with B the H100's overlay tables plus exterior_maps = false
# (.cache/s32_links_h100), ncu of FUSED_TC at p = 7 on A and B (DRAM bytes), then the GPU tests of
# tests/test_fused_face_links.py (the family's tables, the barrier's sources) with the time left.
# Carry: .whl .cache.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ab $OUT/prof
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin9
M="python3 -m composer.cli.main"
ORDERS=7
if [[ "$GPU" == *H200* ]]; then
  sweep_apply docs/data/h200_s32/plans/sweep_plan_face_links.json 7 60 1
  B=${COMPOSER_SCHEDULES:-}
  unset COMPOSER_SCHEDULES
else
  B=$PWD/.cache/s32_links_h100
fi
if [ -n "$B" ]; then
  for run in A1 B1 B2 A2; do
    if [[ $run == B* ]]; then export COMPOSER_SCHEDULES=$B; else unset COMPOSER_SCHEDULES; fi
    timeout 60 $M bench --paths FUSED,FUSED_TC,FUSED_TC16 --orders $ORDERS --rounds 3 --out $OUT/ab/$run \
      > $OUT/logs/ab_$run.log 2>&1; t ab_$run $?
  done
  unset COMPOSER_SCHEDULES
  python3 tools/compare_benches.py --a $OUT/ab/A1 $OUT/ab/A2 --b $OUT/ab/B1 $OUT/ab/B2 > $OUT/logs/ab_compare.log 2>&1
  cat $OUT/logs/ab_compare.log
  tar -C "$OUT" -czf "$OUT/ab.tgz" logs ab 2>/dev/null  # the benches back even if the device time runs out below
  [ $(elapsed) -lt 110 ] && COMPOSER_SCHEDULES=$B timeout 45 $M profile --paths FUSED_TC --orders 7 --out $OUT/prof/links \
    > $OUT/logs/prof_links.log 2>&1; t prof_links $?
  grep -h -iE 'dram|FUSED' $OUT/logs/prof_links.log | head -20
fi
finish_call ab prof sw sched
