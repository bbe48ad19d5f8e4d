#!/usr/bin/env bash
# Session 28 call 13 (about 120 s, any GPU; on an H100 the prospective test of a within-H100 shape transfer): the
# predictions docs/data/h100_s28/model/predict_twins88_h100.json (FUSED_TC16 = FUSED_TC's tables on 16x8x8, both on
# NVRTC 13.5, predicted from call 8's FUSED_TC counters by model_tc_h100.json, K = 2) are committed before this call.
# `composer bench --paths FUSED_TC,FUSED_TC16 --orders 15,31,63,127,255,511 --rounds 2` on those tables, then
# `composer model score` of the predictions against it.
# Carry: .whl .cache/commit .cache/twins135_88 .cache/build_twins135_88. KEEP="docs/data/h200_s28 docs/data/h100_s28".
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench
record_gpu
export COMPOSER_SCHEDULES=$PWD/.cache/twins135_88 COMPOSER_BUILD_DIR=$PWD/.cache/build_twins135_88
timeout 330 python3 -m composer.cli.main bench --paths FUSED_TC,FUSED_TC16 --orders 15,31,63,127,255,511 --rounds 2 \
  --out $OUT/bench/twins88 > $OUT/logs/bench.log 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
timeout 30 python3 -m composer.cli.main model score --predictions docs/data/h100_s28/model/predict_twins88_h100.json \
  --measured $OUT/bench/twins88 --out $OUT/bench/score_twins88_h100.json > $OUT/logs/score.log 2>&1; t score $?
tail -25 $OUT/logs/score.log
finish_call bench
