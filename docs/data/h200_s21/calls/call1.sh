#!/usr/bin/env bash
# Session 21, device call 1 (issue 16, p = 7-63): the x-face trace buffer (`traces = "xfaces"`) and the output
# tile x register budget (family `budget`: threads/tile pairs at min_blocks 0, 3, 4, 5, 6, 8, with and without the
# buffer). Plan: `COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin composer sweep-fused check --orders 7,15,31,63 --subset
# xfaces,budget --pin-nvrtc --max-spill 16 --plan docs/data/h200_s21/plans/sweep_plan_budget.json` (148 rows, every
# row validated on the Table S29 grid, then timed interleaved with the shipped tables), applied at --min-gain 0.01;
# then `composer bench` of GEMM and the fused paths at those orders with the applied tables (3 rounds), the GPU
# tests of the new key (small non-cubic and S29 grids) and of the applied tables, and ncu of FUSED_TC/FUSED_TC16
# at p = 7, 15 as they then run. Carry: .whl .cache/commit .cache/nvrtc_pin.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin
mkdir -p $OUT/bench $OUT/prof
sweep_apply docs/data/h200_s21/plans/sweep_plan_budget.json 7,15,31,63 240 0.01
timeout 170 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 --orders 7,15,31,63 --rounds 3 \
  --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
timeout 150 python3 -m pytest -q -m gpu tests/test_fused_xfaces.py > $OUT/logs/gpu_xfaces.log 2>&1; t gpu_xfaces $?
tail -3 $OUT/logs/gpu_xfaces.log
timeout 100 python3 -m pytest -q -m gpu tests/test_fused_gpu.py -k "test_fused_paths_match_reference and (7- or 15- or 31- or 63-)" \
  > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -3 $OUT/logs/gpu_tests.log
left=$(( 570 - $(elapsed) ))
[ $left -gt 40 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED_TC,FUSED_TC16 --orders 7,15 \
  --out $OUT/prof/p7 > $OUT/logs/prof.log 2>&1; t prof $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
finish_call sw sched bench prof
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
grep -hE "│ fused" $OUT/logs/prof.log | cut -c1-200
