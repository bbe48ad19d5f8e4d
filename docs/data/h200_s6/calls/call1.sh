#!/usr/bin/env bash
# Session 6, device call 1: the whole GPU suite on the new layout and the scheduler (every path now
# launches through composer.sched), then the scheduler's launch cost against the hand-written
# launches of the previous tree (.cache/old = commit 0b9951d) in alternating bench runs at p = 7, 15.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_sm90
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $OUT/logs/gpu.txt 2>&1
timeout 330 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=10 > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
for round in 1 2; do
  for tree in new old; do
    if [ $tree = old ]; then PP=/tmp/site:$PWD/.cache/old; else PP=/tmp/site:$PWD; fi
    PYTHONPATH=$PP timeout 100 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC16 --orders 7,15 \
      --rounds 3 --out $OUT/ab/$tree$round > $OUT/logs/ab_$tree$round.log 2>&1; t ab_$tree$round $?
  done
done
tar -C $OUT -czf $OUT/results.tgz logs ab 2>/dev/null
cat $OUT/logs/times.txt; grep -E "passed|failed|error" $OUT/logs/gpu_tests.log | tail -5
for d in $OUT/ab/*; do echo "== $d"; grep "^| " $d/summary.md | head -8 | cut -c1-140; done
