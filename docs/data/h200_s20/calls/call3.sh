#!/usr/bin/env bash
# Session 20, device call 3 (issue 15): the second prospective shape-twin test, with the model unchanged:
# FUSED_TC's tables on 16x8x8 (`tools/shape_twins.py --orders 15,31,63,127,255 --mma 16x8x8 --out .cache/twins88`,
# built with each table's NVRTC into .cache/build_t88 by tools/merge_builds.py), predicted from model_tc_s20.json
# (the call-2 model) in docs/data/h200_s20/model/predict_twins88.json, committed before this call. Here:
# `composer bench --paths FUSED_TC,FUSED_TC16` at those orders, 3 rounds.
# Carry: .cache/commit .cache/build_t88 .cache/twins88.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench
export COMPOSER_BUILD_DIR=$PWD/.cache/build_t88 COMPOSER_SCHEDULES=$PWD/.cache/twins88
timeout 300 python3 -m composer.cli.main bench --paths FUSED_TC,FUSED_TC16 --orders 15,31,63,127,255 \
  --rounds 3 --out $OUT/bench/twins88 > $OUT/logs/bench_twins88.log 2>&1; t bench_twins88 $?
finish_call bench
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_twins88.log | cut -d'|' -f2,3,6,10,11
