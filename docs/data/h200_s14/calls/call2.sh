#!/usr/bin/env bash
# Session 14, device call 2 (issue 16): call 1's two best single-kernel retiles at p = 511 were one tile
# (64 lines x 256 positions, 256 threads) for the y kernel (-3.3 %, numbered along its axis) and for the
# z kernel (-3.0 %, numbered i first). This call sweeps the stream_yz family (y and z on one tile, each
# kernel with its own numbering: the new per-kernel block_order key), each candidate validated at the
# Table S29 grid and timed after the shipped table; then `sweep-fused apply --min-gain 0.01` into
# $OUT/sched, `composer bench --paths GEMM,FUSED_TC16 --orders 511 --rounds 3` with those schedules
# (the comparison, interleaved), and ncu of FUSED_TC16 at 511 on them.
# Plan: docs/data/h200_s14/plans/sweep_plan_yz.json (tracked). Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/yz $OUT/sched $OUT/bench $OUT/prof
timeout 200 python3 -m composer.cli.main sweep-fused run --orders 511 \
  --plan docs/data/h200_s14/plans/sweep_plan_yz.json --out $OUT/yz --budget 150 > $OUT/logs/sweep_yz.log 2>&1
t sweep_yz $?
python3 -m composer.cli.main sweep-fused apply $OUT/yz/sweep.json --schedules-dir $OUT/sched --min-gain 0.01 \
  > $OUT/logs/apply.log 2>&1; t apply $?
export COMPOSER_SCHEDULES=$OUT/sched
timeout 150 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 511 --rounds 3 --out $OUT/bench/p511 \
  > $OUT/logs/bench511.log 2>&1; t bench511 $?
timeout 120 python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 511 --out $OUT/prof/p511 \
  > $OUT/logs/prof511.log 2>&1; t prof511 $?
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs yz sched bench prof 2>/dev/null
rm -rf $OUT/yz $OUT/bench $OUT/prof
cat $OUT/logs/times.txt; cat $OUT/logs/apply.log; tail -25 $OUT/logs/bench511.log; tail -30 $OUT/logs/prof511.log
