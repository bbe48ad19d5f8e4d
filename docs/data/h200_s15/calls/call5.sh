#!/usr/bin/env bash
# Session 15, device call 5 (issue 16, p = 767). ncu (call 3) puts FUSED_TC16's gap to GEMM at 767 on the
# mainloop's rate (62-69 % of the tensor pipe; cuBLAS 93-94 %). The shipped 767 table's pipeline variants
# (stream_refine rows with the unrolled copies: 8-k panels at 3 and 6 stages, 16-k panels at 4, min_blocks = 2,
# the product operand at 3, 4, 6 stages) and the shipped 511 table transplanted (16-k panels, 2 stages, the
# 256-thread y/z tiles, prefetch; stream_transfer), each validated and timed after the shipped table.
# Plan: docs/data/h200_s15/plans/sweep_plan_pipeline767.json. Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/sw
timeout 300 python3 -m composer.cli.main sweep-fused run --orders 767 \
  --plan docs/data/h200_s15/plans/sweep_plan_pipeline767.json --out $OUT/sw --budget 200 > $OUT/logs/sweep.log 2>&1
t sweep $?
tar -C $OUT -czf $OUT/results.tgz logs sw 2>/dev/null
rm -rf $OUT/sw
cat $OUT/logs/times.txt; grep -E '^\{' $OUT/logs/sweep.log | cut -c1-260
