#!/usr/bin/env bash
# Session 14, device call 4 (issue 16): the x kernel of the p = 511 FUSED_TC16 table (shipped after call 2)
# on the tiles of STREAM_AXIS_TILES (the stream_x family), each validated at the Table S29 grid and timed
# after the shipped table; apply with --min-gain 0.01 into $OUT/sched; then, on whatever schedule wins,
# `composer bench --paths GEMM,FUSED_TC16 --orders 511 --rounds 3` (interleaved, the issue's comparison).
# Plan: docs/data/h200_s14/plans/sweep_plan_x.json (tracked). Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/x $OUT/sched $OUT/bench
timeout 150 python3 -m composer.cli.main sweep-fused run --orders 511 \
  --plan docs/data/h200_s14/plans/sweep_plan_x.json --out $OUT/x --budget 120 > $OUT/logs/sweep_x.log 2>&1
t sweep_x $?
python3 -m composer.cli.main sweep-fused apply $OUT/x/sweep.json --schedules-dir $OUT/sched --min-gain 0.01 \
  > $OUT/logs/apply.log 2>&1; t apply $?
[ -f $OUT/sched/p0511.toml ] && export COMPOSER_SCHEDULES=$OUT/sched
timeout 100 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 511 --rounds 3 --out $OUT/bench/p511 \
  > $OUT/logs/bench511.log 2>&1; t bench511 $?
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs x sched bench 2>/dev/null
rm -rf $OUT/x $OUT/bench
cat $OUT/logs/times.txt; cat $OUT/logs/apply.log; grep -E '^\{' $OUT/logs/sweep_x.log; tail -8 $OUT/logs/bench511.log
