#!/usr/bin/env bash
# Session 19, device call 6 (issue 16): flux_tiles on call 5's pair_io tables at p = 7 and 15 (plan:
# `COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin composer sweep-fused check --orders 7,15 --subset flux_tiles --max-spill
# 32 --pin-nvrtc --plan docs/data/h200_s19/plans/sweep_plan_ft_pio.json`, 46 rows), applied with --min-gain 0.01;
# then `composer bench` of GEMM and the four fused paths at p = 7-63, 3 rounds, every table on its compiler, and
# `composer profile` of FUSED_TC at p = 7, 15, 31 and FUSED_TC16 at 63 (the binding resource of the tables now
# shipped). Carry: .whl .cache/commit .cache/nvrtc_pin .cache/build_n135.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin
mkdir -p $OUT/bench $OUT/prof
sweep_apply docs/data/h200_s19/plans/sweep_plan_ft_pio.json 15,7 150 0.01
export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135
timeout 200 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 \
  --orders 7,15,31,63 --rounds 3 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
left=$(( 560 - $(elapsed) ))
[ $left -gt 50 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED_TC --orders 7,15,31 \
  --out $OUT/prof/tc > $OUT/logs/prof.log 2>&1; t prof $?
left=$(( 560 - $(elapsed) ))
[ $left -gt 40 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 63 \
  --out $OUT/prof/tc16 > $OUT/logs/prof16.log 2>&1; t prof16 $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
finish_call sw sched bench prof
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
grep -hE "│ fused" $OUT/logs/prof.log $OUT/logs/prof16.log | cut -c1-200
