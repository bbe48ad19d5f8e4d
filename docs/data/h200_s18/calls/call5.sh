#!/usr/bin/env bash
# Session 18, device call 5 (prepared, not run; issue 16): the first sweep on NVRTC 13.5. Every shipped table was
# tuned on the device's NVRTC 13.0; 13.5 compiles the p = 255 FUSED_TC16 kernels to 182/182/168 registers (13.0:
# 252/255/200), and with min_blocks = 3 to 168 (32 bytes of spill), room for a third block per SM. The plan
# (`COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin composer sweep-fused check --orders 127,255,511 --subset
# stream_copies,stream_depth --max-spill 32 --pin-nvrtc --plan docs/data/h200_s18/plans/sweep_plan_pin135.json`;
# its 24 FUSED_TC candidates at 255 and 511 then set ok = false, "pruned": no target there; 36 rows left)
# names 13.5 in every candidate's table, the schedule's own table included ("base"), and adds the table as
# shipped ("shipped", compiled on the device by its 13.0); their CUBINs are in the carried cache. (1) `sweep-fused run` of the
# plan, applied with --min-gain 0.01 into $OUT/sched (a winner must beat base and shipped); (2) `composer bench
# --paths GEMM,FUSED_TC16 --orders 127,255,511 --rounds 3` on the applied tables (their kernels from the cache).
# Carry: .whl .cache/commit .cache/nvrtc_pin.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin
mkdir -p $OUT/bench
sweep_apply docs/data/h200_s18/plans/sweep_plan_pin135.json 255,127,511 280 0.01
left=$(( 570 - $(elapsed) ))
[ $left -gt 60 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 127,255,511 \
  --rounds 3 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
finish_call sw sched bench
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
