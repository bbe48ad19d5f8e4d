#!/usr/bin/env bash
# Session 20, device call 8 (issue 16 aside): the shape twins as FUSED_TC16 tables at p = 15 and 31 (FUSED_TC's table
# on 16x8x4 and 16x8x8; call 3 ran p = 15's 16x8x8 twin at 473.7 us beside FUSED_TC's 476.7 and the shipped
# FUSED_TC16's 480.4). Plan: `COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin composer sweep-fused check --orders 15,31
# --subset shape_twin --pin-nvrtc --max-spill 32 --plan docs/data/h200_s20/plans/sweep_plan_twins.json` (every row
# validated, then timed interleaved), applied with --min-gain 0.01; then `composer bench` of FUSED_TC and FUSED_TC16
# at p = 15, 31 with the applied tables (3 rounds) and the fused GPU tests at those orders (small and S29 grids).
# Carry: .cache/commit .cache/nvrtc_pin.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin
mkdir -p $OUT/bench
sweep_apply docs/data/h200_s20/plans/sweep_plan_twins.json 15,31 150 0.01
timeout 150 python3 -m composer.cli.main bench --paths FUSED_TC,FUSED_TC16 --orders 15,31 --rounds 3 \
  --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
timeout 120 python3 -m pytest -q -m gpu tests/test_fused_gpu.py -k "test_fused_paths_match_reference and (15- or 31-)" \
  > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -3 $OUT/logs/gpu_tests.log
finish_call sw sched bench
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
