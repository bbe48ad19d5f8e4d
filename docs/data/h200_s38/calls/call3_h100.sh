#!/usr/bin/env bash
# Session 38 call 3 (any GPU, meant for the H100 the device lends when no H200 starts; about 300 s): the GPU checks
# and relative timings of `descending` (new this session) without applying anything:
# 1. `pytest -m gpu tests/test_fused_descending.py`: every descending table of the family against the reference
#    (small non-cubic grids and the Table S29 grids at p = 7 and 127) and the sweep's stage timing.
# 2. `composer sweep-fused run --timing stages` of docs/data/h200_s38/plans/sweep_plan_descending.json at p = 7, 31,
#    63, 127, twice (sw1, sw2: a second timing of every table, in the other order of runs), no apply.
# Carry: .whl .cache (nvrtc_pin9 with the plan's NVRTC 13.5 kernels, commit).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 sw1 sw2
timeout 150 python3 -m pytest -q -m gpu tests/test_fused_descending.py -p no:cacheprovider \
  > "$OUT/logs/pytest_gpu.log" 2>&1; t pytest_gpu $?
tail -3 "$OUT/logs/pytest_gpu.log"
for run in sw1 sw2; do
  orders=7,31,63,127
  [ $run = sw2 ] && orders=127,63,31,7
  timeout 140 $M sweep-fused run --orders $orders --plan docs/data/h200_s38/plans/sweep_plan_descending.json \
    --out "$OUT/$run" --budget 100 --timing stages > "$OUT/logs/$run.log" 2>&1; t $run $?
  grep -E '^\{' "$OUT/logs/$run.log" | cut -c1-200
done
finish_call sw1 sw2
