#!/usr/bin/env bash
# Session 16, device call 1 (issue 16: FUSED_TC16 faster than GEMM at p = 511 and 767; the fused paths
# closer to the roof). The new streamed-kernel keys: copies = "pointers" (the panel copies from three
# per-thread base pointers at build-time offsets: 155 -> 141 hot-loop instructions per 32 DMMAs at 767,
# y/z 254/214 -> 176 registers) and copy_issue = "mma" (the copies issued after the first MMA k-step),
# and min_blocks = 3 on top of the pointers (12 warps per SM instead of 8; 24 B of spills at 767).
# (1) GPU tests of the keys on small tables (pointers, mma, both, D panels, paired, persistent, DFMA).
# (2) `sweep-fused run` of docs/data/h200_s16/plans/sweep_plan_copies.json (stream_copies family,
# FUSED_TC16 and FUSED_TC at 127, 255, 511, 767), each candidate validated first.
# (3) apply --min-gain 0.01 into $OUT/sched; bench GEMM,FUSED_TC16 at 767 (refreshes b25 either way)
# and at 511 when it got a table. Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/sw $OUT/sched $OUT/bench
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_fused_copies.py \
  > $OUT/logs/copies_gpu_tests.log 2>&1; t copies_gpu_tests $?
timeout 300 python3 -m composer.cli.main sweep-fused run --orders 767,511,255,127 \
  --plan docs/data/h200_s16/plans/sweep_plan_copies.json --out $OUT/sw --budget 240 > $OUT/logs/sweep.log 2>&1
t sweep $?
python3 -m composer.cli.main sweep-fused apply $OUT/sw/sweep.json --schedules-dir $OUT/sched --min-gain 0.01 \
  > $OUT/logs/apply.log 2>&1; t apply $?
for p in 0767 0511; do
  if [ -f $OUT/sched/p$p.toml ]; then export COMPOSER_SCHEDULES=$OUT/sched; else unset COMPOSER_SCHEDULES; fi
  [ $p = 0511 ] && [ ! -f $OUT/sched/p$p.toml ] && continue
  left=$(( 560 - $(elapsed) )); [ $left -gt 70 ] || break
  timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders ${p#0} --rounds 3 \
    --out $OUT/bench/p$p > $OUT/logs/bench$p.log 2>&1; t bench$p $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs sw sched bench 2>/dev/null
rm -rf $OUT/sw $OUT/bench
cat $OUT/logs/times.txt; tail -3 $OUT/logs/copies_gpu_tests.log; cat $OUT/logs/apply.log
grep -E '^\{' $OUT/logs/sweep.log | cut -c1-260; for f in $OUT/logs/bench*.log; do tail -6 $f; done
