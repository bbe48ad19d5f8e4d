#!/usr/bin/env bash
# Session 32 call 2 (any GPU; about 540 s). Issue 16: the face fluxes without vmapP (`exterior_maps = false`, one link
# per element face, composer/fused/links.py) on top of the mapless tables. Cubins in .cache/nvrtc_pin9 (NVRTC 13.5).
# On an H200: `composer sweep-fused run` of docs/data/h200_s32/plans/sweep_plan_face_links.json (the generic tables'
# face_links family at p = 7, 15, 63: each table without vmapM, bricked or not, with and without vmapP), applied at
# 1 % into $OUT/sched; then alternating benches A B B A (A the shipped tables, B $OUT/sched) of FUSED, FUSED_TC and
# FUSED_TC16 at p = 7 and 15; then the GPU tests with the time left.
# Elsewhere (an H100): the GPU tests of tests/test_fused_face_links.py and tests/test_machine_schedules.py, then the
# alternating benches with B the H100's overlay tables plus exterior_maps = false (.cache/s32_links_h100, written by
# docs/data/h200_s32/calls/links_schedules.py h100_sxm .cache/s32_links_h100).
# Carry: .whl .cache.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ab
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin9
M="python3 -m composer.cli.main"
gpu_tests() {
  timeout $1 python3 -m pytest -q -m gpu tests/test_fused_face_links.py tests/test_machine_schedules.py -rs \
    > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
  tail -4 $OUT/logs/gpu_tests.log
}
if [[ "$GPU" == *H200* ]]; then
  sweep_apply docs/data/h200_s32/plans/sweep_plan_face_links.json 7,15,63 130 0.01
  B=${COMPOSER_SCHEDULES:-}
  unset COMPOSER_SCHEDULES
else
  gpu_tests 200
  B=$PWD/.cache/s32_links_h100
fi
if [ -n "$B" ]; then
  for run in A1 B1 B2 A2; do
    if [[ $run == B* ]]; then export COMPOSER_SCHEDULES=$B; else unset COMPOSER_SCHEDULES; fi
    timeout 75 $M bench --paths FUSED,FUSED_TC,FUSED_TC16 --orders 7,15 --rounds 3 --out $OUT/ab/$run \
      > $OUT/logs/ab_$run.log 2>&1; t ab_$run $?
  done
  unset COMPOSER_SCHEDULES
  python3 tools/compare_benches.py --a $OUT/ab/A1 $OUT/ab/A2 --b $OUT/ab/B1 $OUT/ab/B2 > $OUT/logs/ab_compare.log 2>&1
  cat $OUT/logs/ab_compare.log
fi
[[ "$GPU" == *H200* ]] && [ $(elapsed) -lt 420 ] && gpu_tests $(( 540 - $(elapsed) ))
finish_call ab sw sched
