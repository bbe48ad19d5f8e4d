#!/usr/bin/env bash
# Session 20, device call 2 (issue 15): the prospective shape-twin test. FUSED_TC16 on FUSED_TC's tables
# (tools/shape_twins.py --orders 15,31,63,127,255 --out .cache/twins; built into .cache/build_twinm with each
# table's NVRTC by tools/merge_builds.py) was predicted from FUSED_TC's 132-SM counters (s19 c6 and s20 c1) with
# the spill-aware transfer, docs/data/h200_s20/model/predict_twins.json, committed before this call. Here:
# `composer bench --paths FUSED_TC,FUSED_TC16` at those orders, 3 rounds, then ncu of the twins (their binding
# resource and bytes, for the misses).
# Carry: .cache/commit .cache/build_twinm .cache/twins.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
export COMPOSER_BUILD_DIR=$PWD/.cache/build_twinm COMPOSER_SCHEDULES=$PWD/.cache/twins
timeout 300 python3 -m composer.cli.main bench --paths FUSED_TC,FUSED_TC16 --orders 15,31,63,127,255 \
  --rounds 3 --out $OUT/bench/twins > $OUT/logs/bench_twins.log 2>&1; t bench_twins $?
left=$(( 560 - $(elapsed) ))
[ $left -gt 60 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 15,63,127,255 \
  --out $OUT/prof/twins > $OUT/logs/prof_twins.log 2>&1; t prof_twins $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
finish_call bench prof
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_twins.log | cut -d'|' -f2,3,6,10,11
grep -hE "│ fused" $OUT/logs/prof_twins.log | cut -c1-200
