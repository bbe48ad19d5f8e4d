#!/usr/bin/env bash
# Session 31 call 2 (H200 only; about 560 s; stops at once on another GPU). 1. Issue 15, the within-H200 shape transfer
# with source and twins on one compiler (session 28's recipe, 1.4 % median over twelve points within an H100): ncu of
# FUSED_TC at p = 15 ... 511 on its shipped tables compiled by NVRTC 13.5 (.cache/twins135, .cache/build_twins135);
# `composer model fit` on those counters (--machine h200, K = 2, as sessions 20 and 28); `composer model predict
# --as FUSED_TC16=FUSED_TC` of the 16x8x4 twins and the 16x8x8 twins (.cache/build_twins135_88), both files' sha256 and
# the UTC time logged before any twin runs (logs/predictions.txt); then `composer bench --paths FUSED_TC,FUSED_TC16` on
# each twin build and `composer model score`. 2. With the time left, call 5 (issue 16 at p = 7, 15, 63: the element
# order and the face fluxes without vmapM; it packs its own results.tgz, so this call's go to results_i15.tgz first).
# Carry: .whl .cache (twins135, build_twins135, twins135_88, build_twins135_88, nvrtc_pin8, commit).
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/prof $OUT/model $OUT/bench
record_gpu
h200_only
ROOT=$PWD
M="python3 -m composer.cli.main"
ORDERS=15,31,63,127,255,511
COMPOSER_SCHEDULES=$ROOT/.cache/twins135 COMPOSER_BUILD_DIR=$ROOT/.cache/build_twins135 timeout 200 $M profile \
  --paths FUSED_TC --orders $ORDERS --out $OUT/prof/tc > $OUT/logs/prof.log 2>&1; t prof $?
timeout 60 $M model fit --profiles $OUT/prof/tc@h200 --machine h200 --build $ROOT/.cache/build_twins135 --overlap 2 \
  --out $OUT/model/model_tc_h200.json > $OUT/logs/fit.log 2>&1; t fit $?
tail -3 $OUT/logs/fit.log
for tw in twins135 twins135_88; do
  timeout 60 $M model predict --model $OUT/model/model_tc_h200.json --machine h200 --build $ROOT/.cache/build_$tw \
    --paths FUSED_TC16 --orders $ORDERS --as FUSED_TC16=FUSED_TC --out $OUT/model/predict_${tw}_h200.json \
    > $OUT/logs/predict_$tw.log 2>&1; t predict_$tw $?
done
{ date -u +%FT%TZ; sha256sum $OUT/model/*.json; } > $OUT/logs/predictions.txt; cat $OUT/logs/predictions.txt
for tw in twins135 twins135_88; do
  COMPOSER_SCHEDULES=$ROOT/.cache/$tw COMPOSER_BUILD_DIR=$ROOT/.cache/build_$tw timeout 200 $M bench \
    --paths FUSED_TC,FUSED_TC16 --orders $ORDERS --rounds 2 --out $OUT/bench/$tw > $OUT/logs/bench_$tw.log 2>&1
  t bench_$tw $?
  grep -E "^\| FUSED" $OUT/logs/bench_$tw.log | cut -d'|' -f2,3,6,10,11
  timeout 30 $M model score --predictions $OUT/model/predict_${tw}_h200.json --measured $OUT/bench/$tw \
    --out $OUT/model/score_${tw}_h200.json > $OUT/logs/score_$tw.log 2>&1; t score_$tw $?
  timeout 30 $M model score --per-cycle --predictions $OUT/model/predict_${tw}_h200.json --measured $OUT/bench/$tw \
    --out $OUT/model/score_${tw}_h200_cycles.json > $OUT/logs/score_${tw}_cycles.log 2>&1
  tail -12 $OUT/logs/score_$tw.log
done
finish_call prof model bench > /dev/null
mv $OUT/results.tgz $OUT/results_i15.tgz
left=$(( 570 - $(elapsed) ))
# SKIP_CALL5=1 (session 33): the tail is session 32's call 5 in a call of its own
[ $left -gt 150 ] && [ -z "${SKIP_CALL5:-}" ] && CALL_BUDGET_S=$left bash docs/data/h200_s31/calls/call5.sh
