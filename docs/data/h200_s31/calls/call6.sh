#!/usr/bin/env bash
# Session 31 call 6 (any GPU; on an H200 it runs call 2 instead; about 300 s elsewhere). The H100's machine overlay: 1. the
# element order and the face fluxes without vmapM on the H100's own p = 15 tables (the xyz clusters of its overlay;
# plan docs/data/h200_s31/plans/sweep_plan_eo_local_h100_p15.json, `sweep-fused check --machine h100_sxm`), `composer
# sweep-fused run` only (applied here afterwards with `apply --overlay`). 2. Call 4's winners at p = 7 and 63
# (.cache/s31_sched, call 4's $OUT/sched) against the shipped tables in alternating benches (A B B A, 3 rounds each):
# FUSED, FUSED_TC, FUSED_TC16 at p = 7 and 63, to confirm the sweep's single samples before they go into the overlay.
# Carry: .whl .cache.
source tools/device_h200_first.sh docs/data/h200_s31/calls/call2.sh 560
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/sw15 $OUT/ab
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin8
M="python3 -m composer.cli.main"
timeout 150 $M sweep-fused run --orders 15 --plan docs/data/h200_s31/plans/sweep_plan_eo_local_h100_p15.json \
  --out $OUT/sw15 --budget 120 > $OUT/logs/sweep15.log 2>&1; t sweep15 $?
grep -E '^\{' $OUT/logs/sweep15.log | cut -c1-200
for run in A1 B1 B2 A2; do
  if [[ $run == B* ]]; then export COMPOSER_SCHEDULES=$PWD/.cache/s31_sched; else unset COMPOSER_SCHEDULES; fi
  timeout 100 $M bench --paths FUSED,FUSED_TC,FUSED_TC16 --orders 7,63 --rounds 3 --out $OUT/ab/$run \
    > $OUT/logs/ab_$run.log 2>&1; t ab_$run $?
done
unset COMPOSER_SCHEDULES
python3 tools/compare_benches.py --a $OUT/ab/A1 $OUT/ab/A2 --b $OUT/ab/B1 $OUT/ab/B2 > $OUT/logs/ab_compare.log 2>&1
cat $OUT/logs/ab_compare.log
finish_call sw15 ab
