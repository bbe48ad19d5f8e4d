#!/usr/bin/env bash
# Session 18, device call 6 (prepared, not run; issue 16): the box-kernel families at p = 7-63 swept on NVRTC 13.5
# (every shipped box table was chosen on the device's 13.0; 13.5 shortens their hot loops: fused_tc_p31_k0_xy 51
# against 69 instructions). Plan: `COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin composer sweep-fused check --orders
# 7,15,31,63 --subset staged,traces,wide,strip --pin-nvrtc --plan docs/data/h200_s18/plans/sweep_plan_pin135_box.json`
# (75 rows, the schedule's own table pinned to 13.5 as "base" and as shipped as "shipped"). (1) `sweep-fused run`,
# applied with --min-gain 0.01 into $OUT/sched (a winner must beat base and shipped); (2) `composer bench` of GEMM and
# the four fused paths at p = 7-63, 3 rounds, on the applied tables with `COMPOSER_BUILD_DIR` = the NVRTC 13.5 build
# for the tables naming 13.5 that the sweep did not touch. Carry: .whl .cache/commit .cache/nvrtc_pin .cache/build_n135.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin
mkdir -p $OUT/bench
sweep_apply docs/data/h200_s18/plans/sweep_plan_pin135_box.json 31,7,15,63 260 0.01
export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135
left=$(( 570 - $(elapsed) ))
[ $left -gt 60 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 \
  --orders 7,15,31,63 --rounds 3 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
finish_call sw sched bench
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
