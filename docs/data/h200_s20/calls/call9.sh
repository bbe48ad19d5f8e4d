#!/usr/bin/env bash
# Session 20, device call 9 (issue 16): FUSED_TC16's box tables on their other MMA shape at p = 7, 15, 63 (family
# box_shape) and the shape twins there (FUSED_TC's table on 16x8x4 / 16x8x8; the p = 31 twin on 16x8x8 won 3.3 % in
# call 8). Plan: `COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin composer sweep-fused check --orders 7,15,63 --subset
# box_shape,shape_twin --pin-nvrtc --max-spill 32 --plan docs/data/h200_s20/plans/sweep_plan_box_shape.json` (every row
# validated, then timed interleaved), applied with --min-gain 0.01; then `composer bench` of FUSED_TC and FUSED_TC16 at
# those orders with the applied tables (3 rounds) and the fused GPU tests there (small and Table S29 grids).
# Carry: .cache/commit .cache/nvrtc_pin.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin
mkdir -p $OUT/bench
sweep_apply docs/data/h200_s20/plans/sweep_plan_box_shape.json 7,15,63 200 0.01
timeout 150 python3 -m composer.cli.main bench --paths FUSED_TC,FUSED_TC16 --orders 7,15,63 --rounds 3 \
  --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
timeout 120 python3 -m pytest -q -m gpu tests/test_fused_gpu.py -k "test_fused_paths_match_reference and (7- or 15- or 63-)" \
  > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -3 $OUT/logs/gpu_tests.log
finish_call sw sched bench
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
