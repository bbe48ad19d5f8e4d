#!/usr/bin/env bash
# Session 16, device call 3 (issue 16: FUSED_TC16 faster than GEMM at 767). Call 2 put the p = 767 table on
# 16x8x8 MMAs with the pointer copies after the first k-step: a tie with GEMM (1.000, 3 rounds). (1)
# `sweep-fused run` of docs/data/h200_s16/plans/sweep_plan_767.json: around the new table, pipelines (3, 6
# stages, 16-k panels at 3), min_blocks 2 and 3, the product operand (all, y, z, y and z), epilogue
# prefetch (y and z, all), each validated first. (2) apply --min-gain 0.005 into $OUT/sched; bench
# GEMM,FUSED_TC16 at 767, 5 rounds. (3) ncu (`composer profile`) of the shipped p = 511 and 767 FUSED_TC16
# tables (16x8x8; the binding resource now). Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/sw $OUT/sched $OUT/bench $OUT/prof
timeout 200 python3 -m composer.cli.main sweep-fused run --orders 767 \
  --plan docs/data/h200_s16/plans/sweep_plan_767.json --out $OUT/sw --budget 180 > $OUT/logs/sweep.log 2>&1
t sweep $?
python3 -m composer.cli.main sweep-fused apply $OUT/sw/sweep.json --schedules-dir $OUT/sched --min-gain 0.005 \
  > $OUT/logs/apply.log 2>&1; t apply $?
if [ -f $OUT/sched/p0767.toml ]; then export COMPOSER_SCHEDULES=$OUT/sched; fi
timeout 200 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 767 --rounds 5 \
  --out $OUT/bench/p0767 > $OUT/logs/bench0767.log 2>&1; t bench0767 $?
unset COMPOSER_SCHEDULES
left=$(( 560 - $(elapsed) ))
[ $left -gt 60 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 511,767 \
  --out $OUT/prof/p511_767 > $OUT/logs/prof.log 2>&1; t prof $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs sw sched bench prof 2>/dev/null
rm -rf $OUT/sw $OUT/bench $OUT/prof $OUT/sched
cat $OUT/logs/times.txt; cat $OUT/logs/apply.log
grep -E '^\{' $OUT/logs/sweep.log | sed -E 's/"variant": "FUSED_TC16@FUSED_TC16@16x8x[48] box\[1, [0-9]+, [0-9]+\] t[0-9]+ tile\[2, [0-9]+\] /"v": "/' | cut -c1-230
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench0767.log; tail -15 $OUT/logs/prof.log | cut -c1-220
