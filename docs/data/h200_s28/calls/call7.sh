#!/usr/bin/env bash
# Session 28 call 7 (about 200 s, any GPU): the p = 15 xyz cluster kernel with its x faces formed from the staging
# pairs (traces = "xfaces" now allowed in a cluster whose blocks hold whole x lines): GPU tests of the xyz_cluster
# tables (small grids), `composer sweep-fused run` of docs/data/h200_s28/plans/sweep_plan_xyz15_xfaces.json (the
# call-5 front runners with and without xfaces, against the shipped tables), ncu of the applied tables, the bench.
# Carry: .whl .cache/commit .cache/nvrtc_pin5. KEEP="docs/data/h200_s28" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5
timeout 150 python3 -m pytest -q -m gpu tests/test_fused_xyz_cluster.py -k small > $OUT/logs/gpu_tests.log 2>&1
t gpu_tests $?
tail -3 $OUT/logs/gpu_tests.log
sweep_apply docs/data/h200_s28/plans/sweep_plan_xyz15_xfaces.json 15 100 0.01
timeout 60 python3 -m composer.cli.main profile --paths FUSED_TC,FUSED_TC16 --orders 15 --out $OUT/prof/p15 \
  > $OUT/logs/prof15.log 2>&1; t prof15 $?
grep -E "fused_tc" $OUT/logs/prof15.log | cut -c1-170
left=$(( 400 - $(elapsed) ))
timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16 --orders 15 --rounds 3 \
  --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
finish_call sw sched prof bench
