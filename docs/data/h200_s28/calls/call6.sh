#!/usr/bin/env bash
# Session 28 call 6 (about 300 s, H200 only; CALL_BUDGET_S=N bounds it to N s; stops at once on another GPU). 1. Issue 16 at p = 15: the xyz kernel over
# a cluster of 2 (swizzled tiles, 256 threads; on an H100 x0.907 FUSED_TC16, x0.908 FUSED_TC against the shipped
# tables, calls 4-5): `composer sweep-fused run` of docs/data/h200_s28/plans/sweep_plan_xyz15_xfaces.json (the four
# call-4/5 front runners per variant, each also with its x faces formed from the staging pairs), winners at 1 % into $OUT/sched, ncu of FUSED_TC and FUSED_TC16 at 15 on them,
# the bench at 15 with GEMM. Expected from the H100: about 405-410 us for FUSED_TC16 (447.5 shipped; target 400).
# 2. Issue 14: `composer bench --paths GEMM,GEMM_FUSED --orders 511,575 --rounds 2` (the session-26 overlap,
# never benched on the H200). Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5.
# KEEP="docs/data/h200_s28" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
record_gpu
h200_only
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5
sweep_apply docs/data/h200_s28/plans/sweep_plan_xyz15_xfaces.json 15 80 0.01
timeout 60 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 --orders 15 --rounds 3 \
  --out $OUT/bench/p15 > $OUT/logs/bench_p15.log 2>&1; t bench_p15 $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_p15.log | cut -d'|' -f2,3,6,10,11
unset COMPOSER_SCHEDULES
left=$(( ${CALL_BUDGET_S:-570} - 20 - $(elapsed) ))
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout $left python3 -m composer.cli.main bench \
  --paths GEMM,GEMM_FUSED --orders 511,575 --rounds 2 --out $OUT/bench/lib > $OUT/logs/bench_lib.log 2>&1
t bench_lib $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_lib.log | cut -d'|' -f2,3,6,10,11
left=$(( ${CALL_BUDGET_S:-570} - 15 - $(elapsed) ))
[ $left -gt 30 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED_TC,FUSED_TC16 --orders 15 \
  --out $OUT/prof/p15 > $OUT/logs/prof15.log 2>&1; t prof15 $?
grep -E "fused_tc" $OUT/logs/prof15.log | cut -c1-170
finish_call sw sched prof bench
