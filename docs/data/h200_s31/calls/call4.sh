#!/usr/bin/env bash
# Session 31 call 4 (any GPU; on an H200 it runs call 2, issue 15's within-H200 shape transfer, instead; about 560 s).
# Issue 16 at p = 7 to 63: call 3's element order (p = 7 FUSED_TC x0.966 on an H100, 62 MB less DRAM) with the face
# fluxes reading no vmapM (`interior_maps = false`: 34 MB of the p = 7 kernel's DRAM bytes), plan
# docs/data/h200_s31/plans/sweep_plan_eo_local.json (families element_order and local_interior, 85 tables), winners at 1 %
# into $OUT/sched, then the bench at 7-63 with GEMM, ncu of FUSED_TC at 7 and tests/test_fused_interior_maps.py's GPU
# tests. Call 3's text, for the record: the element order (`element_bricks`, composer.fused.order): the blocks take the elements brick
# by brick so that a block's z neighbours run a few hundred blocks away instead of NeX * NeY (1024 at p = 7), and the face
# layers their blocks gather stay in L2 (ncu at p = 7 on an H100, session 27: 1671 MB of DRAM against the kernel's
# 1560-MB floor; re-reading every z layer costs about 134 MB). 1. `composer sweep-fused run` of
# docs/data/h200_s31/plans/sweep_plan_element_order.json (p = 7, 15; the shipped tables and their three best-ranked
# bricks; NVRTC 13.5 cubins in .cache/nvrtc_pin8), winners at 1 % into $OUT/sched. 2. ncu of FUSED_TC at p = 7 and
# FUSED_TC16 at 15, shipped and applied (DRAM bytes). 3. The bench at 7 and 15 with GEMM on the applied tables. 4. The
# GPU tests of tests/test_fused_element_order.py. Carry: .whl .cache (.cache/commit first).
source tools/device_h200_first.sh docs/data/h200_s31/calls/call2.sh 560
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin8
sweep_apply docs/data/h200_s31/plans/sweep_plan_eo_local.json 7,15,31,63 250 0.01
M="python3 -m composer.cli.main"
timeout 120 $M bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 --orders 7,15,31,63 --rounds 2 --out $OUT/bench/b \
  > $OUT/logs/bench.log 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
timeout 40 $M profile --paths FUSED_TC --orders 7 --out $OUT/prof/applied > $OUT/logs/prof_applied.log 2>&1; t prof_applied $?
grep -hE "fused_tc" $OUT/logs/prof_applied.log | cut -c1-170
left=$(( 560 - $(elapsed) ))
[ $left -gt 40 ] && { timeout $left python3 -m pytest -q -m gpu tests/test_fused_interior_maps.py -rs > $OUT/logs/gpu_im.log 2>&1
  t gpu_im $?; tail -3 $OUT/logs/gpu_im.log; }
finish_call sw sched prof bench
