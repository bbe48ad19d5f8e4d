#!/usr/bin/env bash
# Session 14, device call 6 (issue 16). Call 5's ncu source counters put 23 % of the p = 511 FUSED_TC16 z
# kernel's stall samples on its epilogue's DMULs and DADDs waiting for the metric and dqdt loads (long
# scoreboard; 7 % in y): 256 rows 2 MiB apart per block. New per-kernel key `prefetch = N`: those lines
# into L2 N panels before the contraction ends. (1) The GPU test of the small streamed tables (now with y
# and z prefetching). (2) The stream_prefetch family at 511 (z; y and z; all three; 2, 4, 8 panels ahead),
# each validated at the Table S29 grid and timed after the shipped table; apply with --min-gain 0.01 into
# $OUT/sched; then `composer bench --paths GEMM,FUSED_TC16 --orders 511 --rounds 3` on the result.
# Plan: docs/data/h200_s14/plans/sweep_plan_prefetch.json (tracked). Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/pf $OUT/sched $OUT/bench
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_fused_stream.py -k small_tables \
  > $OUT/logs/stream_gpu_tests.log 2>&1; t stream_gpu_tests $?
timeout 180 python3 -m composer.cli.main sweep-fused run --orders 511 \
  --plan docs/data/h200_s14/plans/sweep_plan_prefetch.json --out $OUT/pf --budget 150 > $OUT/logs/sweep_pf.log 2>&1
t sweep_pf $?
python3 -m composer.cli.main sweep-fused apply $OUT/pf/sweep.json --schedules-dir $OUT/sched --min-gain 0.01 \
  > $OUT/logs/apply.log 2>&1; t apply $?
[ -f $OUT/sched/p0511.toml ] && export COMPOSER_SCHEDULES=$OUT/sched
timeout 100 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 511 --rounds 3 --out $OUT/bench/p511 \
  > $OUT/logs/bench511.log 2>&1; t bench511 $?
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs pf sched bench 2>/dev/null
rm -rf $OUT/pf $OUT/bench
cat $OUT/logs/times.txt; tail -2 $OUT/logs/stream_gpu_tests.log; cat $OUT/logs/apply.log; grep -E '^\{' $OUT/logs/sweep_pf.log | cut -c1-330; tail -7 $OUT/logs/bench511.log
