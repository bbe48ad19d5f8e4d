#!/usr/bin/env bash
# Session 20, device call 1 (issue 15, the shape transfer): ncu of the shipped tables the transfer needs
# on both sides (FUSED_TC at p = 63, 127, 255; FUSED_TC16 at 7, 15, 31, 127, 255: with session 19 call 6's
# FUSED_TC at 7-31 and FUSED_TC16 at 63, every order 7-255 has both binaries profiled as shipped), then the
# first prospective shape-twin bench: FUSED_TC16 on FUSED_TC's p = 15 table (tools/shape_twins.py, predicted
# in docs/data/h200_s20/model/predict_twin15.json before this call) beside FUSED_TC, 3 rounds.
# Carry: .cache/commit .cache/build_n135 .cache/build_twin .cache/twins.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135
timeout 200 python3 -m composer.cli.main profile --paths FUSED_TC --orders 63,127,255 \
  --out $OUT/prof/tc > $OUT/logs/prof_tc.log 2>&1; t prof_tc $?
left=$(( 470 - $(elapsed) ))
[ $left -gt 60 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 7,15,31,127,255 \
  --out $OUT/prof/tc16 > $OUT/logs/prof_tc16.log 2>&1; t prof_tc16 $?
export COMPOSER_BUILD_DIR=$PWD/.cache/build_twin COMPOSER_SCHEDULES=$PWD/.cache/twins
left=$(( 560 - $(elapsed) ))
[ $left -gt 30 ] && timeout $left python3 -m composer.cli.main bench --paths FUSED_TC,FUSED_TC16 --orders 15 \
  --rounds 3 --out $OUT/bench/twin15 > $OUT/logs/bench_twin15.log 2>&1; t bench_twin15 $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
finish_call bench prof
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_twin15.log | cut -d'|' -f2,3,6,10,11
grep -hE "│ fused" $OUT/logs/prof_tc.log $OUT/logs/prof_tc16.log | cut -c1-200
