#!/usr/bin/env bash
# Session 28 call 4 (about 300 s, any GPU: an H100 gives relative evidence): issue 16's xyz decomposition at p = 31
# (and 15) on a thread-block cluster (family `xyz_cluster`: one kernel over the element, each block 1/c of its
# k-planes, z contracted across the cluster through distributed shared memory; byte floor 283 against the xy|z
# split's 394 us at p = 31 on the H200).
# 1. GPU tests of the family on the small grids. 2. `composer sweep-fused run` of
# docs/data/h200_s28/plans/sweep_plan_xyz_cluster.json at p = 15, 31 (every table validated on the Table S29 grid
# first; pinned NVRTC 13.5 cubins in .cache/nvrtc_pin5), winners at 1 % into $OUT/sched. 3. ncu of FUSED_TC and
# FUSED_TC16 at 15, 31 on what was applied, the bench at 15, 31.
# Carry: .whl .cache/commit .cache/nvrtc_pin5. KEEP="docs/data/h200_s28" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5
timeout 120 python3 -m pytest -q -m gpu tests/test_fused_xyz_cluster.py -k small > $OUT/logs/gpu_tests.log 2>&1
t gpu_tests $?
tail -3 $OUT/logs/gpu_tests.log
sweep_apply docs/data/h200_s28/plans/sweep_plan_xyz_cluster.json 15,31 220 0.01
timeout 100 python3 -m composer.cli.main profile --paths FUSED_TC,FUSED_TC16 --orders 15,31 --out $OUT/prof/p15_31 \
  > $OUT/logs/prof.log 2>&1; t prof $?
grep -E "fused_tc" $OUT/logs/prof.log | cut -c1-170 | head -12
left=$(( 560 - $(elapsed) ))
[ $left -gt 40 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16 \
  --orders 15,31 --rounds 2 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
finish_call sw sched prof bench
