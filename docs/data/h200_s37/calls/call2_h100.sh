#!/usr/bin/env bash
# Session 37 call 2 (an H100, the fallback while every H200 start is refused; about 250 s): what an H100 can settle of
# call 1 before an H200 measures it.
# 1. The x pairs on bricks on the GPU: the marked tests of tests/test_fused_element_order.py ("pair": the pair_bricks
#    family at p = 7 against the reference on small non-cubic grids, bricks of pairs cut at their ends, and on the
#    Table S29 grid).
# 2. `composer sweep-fused run` of docs/data/h200_s37/plans/sweep_plan_pair_bricks.json at p = 7 and 15 (the H100 overlay's
#    p = 7 tables are the generic ones), applied at 1 % into $OUT/sched.
# 3. FUSED_DFMA on the p = 15 cluster-of-two table (FUSED_TC's, also the H100 overlay's), validated and timed beside
#    FUSED_TC: `composer bench --paths FUSED_TC,FUSED_DFMA --orders 7,15 --rounds 2`.
# Carry: .whl .cache (nvrtc_pin9, commit).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 bench
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_fused_element_order.py -k pair \
  > "$OUT/logs/gpu_pairs.log" 2>&1; t gpu_pairs $?
tail -3 "$OUT/logs/gpu_pairs.log"
sweep_apply docs/data/h200_s37/plans/sweep_plan_pair_bricks.json 7,15 140 0.01
timeout 150 $M bench --paths FUSED_TC,FUSED_DFMA --orders 7,15 --rounds 2 --out "$OUT/bench/dfma" \
  > "$OUT/logs/bench_dfma.log" 2>&1; t bench_dfma $?
grep -E "^\| FUSED" "$OUT/logs/bench_dfma.log" | cut -d'|' -f2,3,6,10
finish_call bench sw sched
