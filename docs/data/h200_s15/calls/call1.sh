#!/usr/bin/env bash
# Session 15, device call 1 (issue 16: FUSED_TC16 faster than GEMM at p = 511 and 767). Session 14 left
# 511 at 1.013 x GEMM and 767 at 1.081. (1) The GPU test of the small streamed tables (now with the
# per-kernel `a_operand` key). (2) One `sweep-fused run` of FUSED_TC16 candidates, each validated on the
# point-varying input at the Table S29 grid, then timed after the shipped table: at 511 the product operand
# on y, z or both (stream_operand, the fragment DMULs that stall z on `math`); at 767 the same, plus the
# stream_prefetch family (z; y+z; all; 1/2/4/8 panels ahead) and the stream_yz family (y and z together on
# 64x128, 128x128, 256x32, 256x64 tiles under both numberings: 511's winning recipe among them).
# Plan: docs/data/h200_s15/plans/sweep_plan_call1.json (FUSED_TC16 rows of
# docs/data/h200_s14/plans/sweep_plan_operand.json and of the 767 plans sweep_plan_{prefetch,yz}767.json).
# (3) Apply with --min-gain 0.01 into $OUT/sched; bench GEMM,FUSED_TC16 at each order that got a table.
# Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/sw $OUT/sched $OUT/bench
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_fused_stream.py -k small_tables \
  > $OUT/logs/stream_gpu_tests.log 2>&1; t stream_gpu_tests $?
timeout 330 python3 -m composer.cli.main sweep-fused run --orders 511,767 \
  --plan docs/data/h200_s15/plans/sweep_plan_call1.json --out $OUT/sw --budget 200 > $OUT/logs/sweep.log 2>&1
t sweep $?
python3 -m composer.cli.main sweep-fused apply $OUT/sw/sweep.json --schedules-dir $OUT/sched --min-gain 0.01 \
  > $OUT/logs/apply.log 2>&1; t apply $?
export COMPOSER_SCHEDULES=$OUT/sched
for p in 0511 0767; do
  [ -f $OUT/sched/p$p.toml ] || continue
  left=$(( 540 - $(elapsed) )); [ $left -gt 60 ] || break
  timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders ${p#0} --rounds 3 \
    --out $OUT/bench/p$p > $OUT/logs/bench$p.log 2>&1; t bench$p $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs sw sched bench 2>/dev/null
rm -rf $OUT/sw $OUT/bench
cat $OUT/logs/times.txt; tail -2 $OUT/logs/stream_gpu_tests.log; cat $OUT/logs/apply.log
grep -E '^\{' $OUT/logs/sweep.log | cut -c1-300; for f in $OUT/logs/bench*.log; do tail -6 $f; done
