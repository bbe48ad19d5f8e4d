#!/usr/bin/env bash
# Session 31 call 5 (H200 only; CALL_BUDGET_S=N bounds it; about 300 s; stops at once on another GPU). Issue 16 at p = 7,
# 15 and 63 on the H200: the element order (`element_bricks`) and the face fluxes without vmapM (`interior_maps = false`),
# which on an H100 ran FUSED_TC p = 7 at x0.950 of its table (550.4 against 579.5 us, 96 MB less DRAM: 1442 against
# 1538 MB read; calls 3-4, docs/data/h100_s31): `composer sweep-fused run` of
# docs/data/h200_s31/plans/sweep_plan_eo_local.json at p = 7, 15, 63 (cubins in .cache/nvrtc_pin8), winners at 1 % into
# $OUT/sched; the bench at 7, 15, 63 with GEMM on them (expected about 422 us for FUSED_TC at p = 7 if x0.95 holds:
# target 420); ncu of FUSED_TC at p = 7. Carry: .whl .cache.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench5 $OUT/prof5
record_gpu
h200_only
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin8
sweep_apply docs/data/h200_s31/plans/sweep_plan_eo_local.json 7,15,63 150 0.01
M="python3 -m composer.cli.main"
left=$(( ${CALL_BUDGET_S:-560} - 40 - $(elapsed) ))
timeout $left $M bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 --orders 7,15,63 --rounds 3 --out $OUT/bench5/b \
  > $OUT/logs/bench5.log 2>&1; t bench5 $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench5.log | cut -d'|' -f2,3,6,10,11
left=$(( ${CALL_BUDGET_S:-560} - 10 - $(elapsed) ))
[ $left -gt 20 ] && { timeout $left $M profile --paths FUSED_TC --orders 7 --out $OUT/prof5/applied > $OUT/logs/prof5.log 2>&1
  t prof5 $?; grep -hE "fused_tc" $OUT/logs/prof5.log | cut -c1-170; }
finish_call sw sched prof5 bench5
