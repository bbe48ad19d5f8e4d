#!/usr/bin/env bash
# Session 19, device call 4 (issue 16): the new table key flux_tiles = 2 at p = 7 and 15. p = 15's xyz kernel holds
# four 41-KB tiles: one block (16 warps) per SM, latency bound (call 3 ncu: long_scoreboard, 25 % occupancy). With
# two flux tiles z's fluxes are staged into y's tile after y's contraction (q again, from L2): 95 KB, two blocks
# per SM. Plan: `COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin composer sweep-fused check --orders 7,15 --subset
# flux_tiles --max-spill 32 --pin-nvrtc --plan docs/data/h200_s19/plans/sweep_plan_ft.json` (47 rows; every
# candidate on NVRTC 13.5, its CUBINs in the carried cache; "base" and "shipped" timed too). (1) `sweep-fused run`,
# applied with --min-gain 0.01 into $OUT/sched; (2) `composer bench` of GEMM and the four fused paths at p = 7, 15,
# 3 rounds, on the applied tables (the other 13.5 tables from COMPOSER_BUILD_DIR); (3) `composer profile` of
# FUSED_TC and FUSED_TC16 at p = 15 on the applied tables. Carry: .whl .cache/commit .cache/nvrtc_pin .cache/build_n135.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin
mkdir -p $OUT/bench $OUT/prof
sweep_apply docs/data/h200_s19/plans/sweep_plan_ft.json 15,7 200 0.01
export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135
timeout 200 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 \
  --orders 7,15 --rounds 3 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
left=$(( 560 - $(elapsed) ))
[ $left -gt 50 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED,FUSED_TC,FUSED_TC16 --orders 15 \
  --out $OUT/prof/p15 > $OUT/logs/prof.log 2>&1; t prof $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
finish_call sw sched bench prof
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
grep -E "│ fused" $OUT/logs/prof.log | cut -c1-200
