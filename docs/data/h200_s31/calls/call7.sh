#!/usr/bin/env bash
# Session 31 call 7 (any GPU; on an H200 it runs call 2 instead; about 250 s elsewhere). 1. `composer sweep-fused run` of
# docs/data/h200_s31/plans/sweep_plan_brick_refine_h100.json (planned with `--machine h100_sxm`: the H100's tables against
# eight brick shapes of their mapless one-element forms at p = 7 and 15), applied afterwards with `apply --overlay` if
# anything wins by 1 %. 2. The GPU tests of tests/test_fused_element_order.py, tests/test_fused_interior_maps.py (their
# shared helper, refactored since calls 3-4) and tests/test_machine_schedules.py (every overlay table against the
# reference). 3. `composer bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 --orders 7,15,63 --rounds 3` on the H100's tables
# (its overlay). Carry: .whl .cache.
source tools/device_h200_first.sh docs/data/h200_s31/calls/call2.sh 560
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/swr $OUT/bench
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin8
M="python3 -m composer.cli.main"
timeout 150 $M sweep-fused run --orders 7,15 --plan docs/data/h200_s31/plans/sweep_plan_brick_refine_h100.json \
  --out $OUT/swr --budget 120 > $OUT/logs/sweep_refine.log 2>&1; t sweep_refine $?
grep -E '^\{' $OUT/logs/sweep_refine.log | cut -c1-160
timeout 200 python3 -m pytest -q -m gpu tests/test_fused_element_order.py tests/test_fused_interior_maps.py \
  tests/test_machine_schedules.py -rs > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -4 $OUT/logs/gpu_tests.log
timeout 120 $M bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 --orders 7,15,63 --rounds 3 --out $OUT/bench/h100 \
  > $OUT/logs/bench.log 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
finish_call swr bench
