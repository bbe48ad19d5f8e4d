#!/usr/bin/env bash
# Session 20, device call 5 (issue 15): the prospective test of the occupancy axis. FUSED_TC's p = 511 table on
# 16x8x4 and on 16x8x8 (tools/shape_twins.py --orders 511 [--mma 16x8x8]; both NVRTC 13.0 twins hold one block per SM
# where FUSED_TC holds two) was predicted from model_tc_occ.json (FUSED_TC's counters with its occupancy axis from
# call 4) in docs/data/h200_s20/model/predict_occ_twins{,88}_hi.json, committed before this call. Here: `composer
# bench` of FUSED_TC with each twin, 2 rounds (the device compiles the 13.0 tables itself).
# Carry: .cache/commit .cache/twins_hi .cache/twins88_hi.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench
COMPOSER_SCHEDULES=$PWD/.cache/twins_hi timeout 270 python3 -m composer.cli.main bench --paths FUSED_TC,FUSED_TC16 \
  --orders 511 --rounds 2 --out $OUT/bench/twins511 > $OUT/logs/bench_twins511.log 2>&1; t bench_twins511 $?
left=$(( 560 - $(elapsed) ))
[ $left -gt 60 ] && COMPOSER_SCHEDULES=$PWD/.cache/twins88_hi timeout $left python3 -m composer.cli.main bench \
  --paths FUSED_TC16 --orders 511 --rounds 2 --out $OUT/bench/twins88_511 > $OUT/logs/bench_twins88_511.log 2>&1
t bench_twins88_511 $?
finish_call bench
grep -hE "^\| (GEMM|FUSED)" $OUT/logs/bench_twins511.log $OUT/logs/bench_twins88_511.log | cut -d'|' -f2,3,6,10,11
