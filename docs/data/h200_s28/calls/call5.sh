#!/usr/bin/env bash
# Session 28 call 5 (about 200 s, any GPU): around call 4's p = 15 winners (xyz over a cluster of 2, swizzled tiles:
# FUSED_TC16 511.1 against 563.6 us, FUSED_TC 515.5 against 567.5 on an H100): `composer sweep-fused run` of
# docs/data/h200_s28/plans/sweep_plan_xyz_refine.json (their warp tiles at register caps of 3 blocks per SM, the
# metric weights early or late, both FUSED_TC16 shapes; call 4's winners are among them, uncapped) against the
# shipped tables, winners at 1 %; then the bench of GEMM and the fused paths at p = 15 on what was applied.
# Carry: .whl .cache/commit .cache/nvrtc_pin5. KEEP="docs/data/h200_s28" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5
sweep_apply docs/data/h200_s28/plans/sweep_plan_xyz_refine.json 15 150 0.01
left=$(( 300 - $(elapsed) ))
timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 \
  --orders 15 --rounds 3 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
finish_call sw sched bench
