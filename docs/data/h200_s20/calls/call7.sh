#!/usr/bin/env bash
# Session 20, device call 7 (issue 15): the third prospective shape-twin test. FUSED_TC's p = 767 table on 16x8x4 and
# on 16x8x8 (tools/shape_twins.py --orders 767 [--mma 16x8x8], NVRTC 13.0 on the device; both keep FUSED_TC's 16 warps
# per SM) was predicted from call 6's counters with the K = 2 form in docs/data/h200_s20/model/
# predict_k2_twins{,88}_hi_767.json, committed before this call. Here: `composer bench` of FUSED_TC with the 16x8x4
# twin and of the 16x8x8 twin, 2 rounds, then ncu of both twins (the bench is power-capped at 767; the model predicts
# unthrottled kernel time).
# Carry: .cache/commit .cache/twins_hi .cache/twins88_hi.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
COMPOSER_SCHEDULES=$PWD/.cache/twins_hi timeout 250 python3 -m composer.cli.main bench --paths FUSED_TC,FUSED_TC16 \
  --orders 767 --rounds 2 --out $OUT/bench/twins767 > $OUT/logs/bench_twins767.log 2>&1; t bench_twins767 $?
left=$(( 560 - $(elapsed) ))
[ $left -gt 80 ] && COMPOSER_SCHEDULES=$PWD/.cache/twins88_hi timeout $(( left - 10 )) python3 -m composer.cli.main bench \
  --paths FUSED_TC16 --orders 767 --rounds 2 --out $OUT/bench/twins88_767 > $OUT/logs/bench_twins88_767.log 2>&1
t bench_twins88_767 $?
left=$(( 570 - $(elapsed) ))
[ $left -gt 50 ] && COMPOSER_SCHEDULES=$PWD/.cache/twins_hi timeout $left python3 -m composer.cli.main profile \
  --paths FUSED_TC16 --orders 767 --out $OUT/prof/twin767 > $OUT/logs/prof_twin767.log 2>&1; t prof_twin767 $?
for f in $(find $OUT/prof -name '*.csv' 2>/dev/null); do gzip $f; done
finish_call bench prof
grep -hE "^\| (GEMM|FUSED)" $OUT/logs/bench_twins767.log $OUT/logs/bench_twins88_767.log | cut -d'|' -f2,3,6,10,11
grep -hE "│ fused" $OUT/logs/prof_twin767.log | cut -c1-150
