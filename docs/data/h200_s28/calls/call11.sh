#!/usr/bin/env bash
# Session 28 call 11 (about 150 s, any GPU): the p = 15 xyz cluster of 2 split along y (box [16, 8, 16], dirs "xzy": z
# contracted locally, y across the pair) or x (box [16, 16, 8], "yzx", padded tiles: 85 KB) against call 4-7's z split
# (docs/data/h200_s28/plans/sweep_plan_xyz15_split.json, pinned NVRTC 13.5 cubins in .cache/nvrtc_pin5), winners at
# 1 %, then the bench at 15.
# Carry: .whl .cache/commit .cache/nvrtc_pin5. KEEP="docs/data/h200_s28" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5
sweep_apply docs/data/h200_s28/plans/sweep_plan_xyz15_split.json 15 90 0.01
timeout 100 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16 --orders 15 --rounds 3 \
  --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
finish_call sw sched bench
