#!/usr/bin/env bash
# Session 15, device call 2 (issue 16: FUSED_TC16 faster than GEMM at p = 511 and 767). Call 1 applied y
# on the product operand at 511 (11005.7 against 11135.0 us) and left a tie with GEMM (1.000, 3 rounds);
# at 767 nothing helped. New: persistent blocks (per-kernel `persistent = true`): the launch holds the
# resident blocks only, each walks its tiles through one cp.async pipeline that crosses into the next
# tile while this one's epilogue runs. (1) GPU tests: the small streamed tables (the session-14 test,
# whose dpanels case a renamed local had broken in call 1) and the persistent small tables (natural grid
# and a 3-block grid). (2) `sweep-fused run` of stream_persistent (x, y, z, all) for FUSED_TC16 at 511 and
# 767, validated on the point-varying input at the Table S29 grid, timed after the shipped table.
# (3) Apply with --min-gain 0.01 into $OUT/sched; bench GEMM,FUSED_TC16 at 511 (5 rounds) and, if it got
# a table, at 767 (3 rounds). Plan: docs/data/h200_s15/plans/sweep_plan_persistent.json. Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/sw $OUT/sched $OUT/bench
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_fused_stream.py -k "small_tables" \
  > $OUT/logs/stream_gpu_tests.log 2>&1; t stream_gpu_tests $?
timeout 240 python3 -m composer.cli.main sweep-fused run --orders 511,767 \
  --plan docs/data/h200_s15/plans/sweep_plan_persistent.json --out $OUT/sw --budget 150 > $OUT/logs/sweep.log 2>&1
t sweep $?
python3 -m composer.cli.main sweep-fused apply $OUT/sw/sweep.json --schedules-dir $OUT/sched --min-gain 0.01 \
  > $OUT/logs/apply.log 2>&1; t apply $?
export COMPOSER_SCHEDULES=$OUT/sched
left=$(( 560 - $(elapsed) ))
timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 511 --rounds 5 \
  --out $OUT/bench/p0511 > $OUT/logs/bench0511.log 2>&1; t bench0511 $?
left=$(( 560 - $(elapsed) ))
if [ -f $OUT/sched/p0767.toml ] && [ $left -gt 120 ]; then
  timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 767 --rounds 3 \
    --out $OUT/bench/p0767 > $OUT/logs/bench0767.log 2>&1; t bench0767 $?
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs sw sched bench 2>/dev/null
rm -rf $OUT/sw $OUT/bench
cat $OUT/logs/times.txt; tail -3 $OUT/logs/stream_gpu_tests.log; grep -E "^E " $OUT/logs/stream_gpu_tests.log | head -5
cat $OUT/logs/apply.log; grep -E '^\{' $OUT/logs/sweep.log | cut -c1-300; for f in $OUT/logs/bench0*.log; do grep -E "^\| (GEMM|FUSED)" $f; done
