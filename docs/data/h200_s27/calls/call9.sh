#!/usr/bin/env bash
# Session 27 call 9: on an H200, call7.sh. On another GPU (about 120 s): session 26's plan, regenerated (its three
# strip tables with traces = tiles on flux_tiles, which the loader refuses, are gone),
# docs/data/h200_s27/plans/sweep_plan_s27.json (strip, x_pairs, flux_tiles on the shipped p = 7, 15 tables) at p = 7
# and 15, as relative evidence of which exchange of x-face traces relieves the L2 partition link (session 25's H100
# verdict held on the H200 in session 26), then ncu of the p = 7 winner with the L2 breakdown.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin4. KEEP="docs/data/h200_s26 docs/data/h200_s27".
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then exec bash docs/data/h200_s27/calls/call7.sh; fi
set -o pipefail
source tools/device_prelude.sh
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin4
sweep_apply docs/data/h200_s27/plans/sweep_plan_s27.json 7,15 110 0.01
timeout 120 python3 -m composer.cli.main profile --paths FUSED_TC,FUSED_TC16 --orders 7 --out $OUT/prof/p7 \
  > $OUT/logs/prof7.log 2>&1; t prof7 $?
grep -E "fused_tc" $OUT/logs/prof7.log | cut -c1-190
finish_call sw sched prof
