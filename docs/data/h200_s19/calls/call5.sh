#!/usr/bin/env bash
# Session 19, device call 5 (issue 16): the table key pair_io at p = 7-63 and the current figures. pair_io moves two
# doubles 16 bytes apart as one 16-byte access: the first kernel's dqdt store (ptxas had split it into two
# STG.E.64) and the x weights on the tensor cores (call 3 source counters: these were 20-25 % of the p = 7 / 15
# kernels' L2 sector requests, L2 at 92-96 %). Plan: `COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin composer sweep-fused
# check --orders 7,15,31,63 --subset pair_io --max-spill 32 --plan docs/data/h200_s19/plans/sweep_plan_pio.json`
# (24 rows; each candidate on its schedule's compiler: 13.5 CUBINs from the carried cache, 13.0 compiled there).
# (1) `sweep-fused run`, applied with --min-gain 0.01; (2) `composer bench` of GEMM and the four fused paths at
# p = 7-255, 3 rounds, every table on its compiler (COMPOSER_BUILD_DIR = the 13.5 build of this tree, with call
# 4's p = 15 flux_tiles tables). Carry: .whl .cache/commit .cache/nvrtc_pin .cache/build_n135.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin
mkdir -p $OUT/bench
sweep_apply docs/data/h200_s19/plans/sweep_plan_pio.json 15,7,31,63 150 0.01
export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135
left=$(( 575 - $(elapsed) ))
[ $left -gt 60 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 \
  --orders 7,15,31,63,127,255 --rounds 3 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
finish_call sw sched bench
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
