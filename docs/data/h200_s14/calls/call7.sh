#!/usr/bin/env bash
# Session 14, device call 7 (issue 16): the epilogue prefetch one panel before the end (call 6's best was two
# panels ahead for y and z: 10952.9 against 11219.1 us; four and eight were slower). Plan: the stream_prefetch
# family on the table applied after call 6, FUSED_TC16 only, the candidates with a kernel one panel ahead
# (docs/data/h200_s14/plans/sweep_plan_prefetch1.json: `composer sweep-fused check --orders 511 --subset
# stream_prefetch` filtered to the base and the "/pf1" labels). Then apply (--min-gain 0.01) and
# `composer bench --paths GEMM,FUSED_TC16 --orders 511 --rounds 5` on the result (call 6's 3 rounds left
# the ratio 1.008 unresolved). Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/pf1 $OUT/sched $OUT/bench
timeout 110 python3 -m composer.cli.main sweep-fused run --orders 511 \
  --plan docs/data/h200_s14/plans/sweep_plan_prefetch1.json --out $OUT/pf1 --budget 100 > $OUT/logs/sweep_pf1.log 2>&1
t sweep_pf1 $?
python3 -m composer.cli.main sweep-fused apply $OUT/pf1/sweep.json --schedules-dir $OUT/sched --min-gain 0.01 \
  > $OUT/logs/apply.log 2>&1; t apply $?
[ -f $OUT/sched/p0511.toml ] && export COMPOSER_SCHEDULES=$OUT/sched
timeout 90 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 511 --rounds 5 --out $OUT/bench/p511 \
  > $OUT/logs/bench511.log 2>&1; t bench511 $?
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs pf1 sched bench 2>/dev/null
rm -rf $OUT/pf1 $OUT/bench
cat $OUT/logs/times.txt; cat $OUT/logs/apply.log; grep -E '^\{' $OUT/logs/sweep_pf1.log | cut -c1-300; tail -7 $OUT/logs/bench511.log
