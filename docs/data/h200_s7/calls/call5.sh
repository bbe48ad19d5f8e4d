#!/usr/bin/env bash
# Session 7, device call 5: call 4 found the plans' machine was the H100 entry on the H200 (same
# arch and SM count), so the recorded h200 node times never applied; cost_machine now identifies the
# GPU by its memory. (a) scheduler GPU tests; (b) launch-cost A/B against the hand-written launches at
# p = 7, 15; (c) times vs hints for GEMM and GEMM_CUTE at p = 7 ... 127; (d) GEMM_FUSED at p = 511 with
# the shipped 16x8x8 y carrier against GEMM; the plan's machine is printed by graph.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
export COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf
mkdir -p $OUT/ab $OUT/hints $OUT/gf
python3 -m composer.cli.main graph --path GEMM --order 7 --measure --repeats 3 --json 2>/dev/null \
  | grep -o '"cost_machine": "[^"]*"' > $OUT/logs/cost_machine.txt
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_sched_gpu.py > $OUT/logs/sched_tests.log 2>&1; t sched_tests $?
for round in 1 2; do
  for tree in new old; do
    DIR=$ROOT; [ $tree = old ] && DIR=$ROOT/.cache/old
    (cd $DIR && PYTHONPATH=/tmp/site timeout 45 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC16 \
      --orders 7,15 --rounds 3 --out $OUT/ab/$tree$round > $OUT/logs/ab_$tree$round.log 2>&1); t ab_$tree$round $?
  done
  [ $(elapsed) -gt 100 ] && break
done
for v in times hints; do
  EXTRA=""; [ $v = hints ] && EXTRA="--option GEMM.node_us=hints --option GEMM_CUTE.node_us=hints"
  timeout 50 python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE --orders 7,15,31,63,127 --rounds 2 $EXTRA \
    --out $OUT/hints/$v > $OUT/logs/hints_$v.log 2>&1; t hints_$v $?
done
L=$(( 230 - $(elapsed) )); [ $L -gt 25 ] && { timeout $L python3 -m composer.cli.main bench --paths GEMM,GEMM_FUSED \
  --orders 511 --rounds 2 --out $OUT/gf/p511 > $OUT/logs/gf511.log 2>&1; t gf511 $?; }
tar -C $OUT -czf $OUT/results.tgz logs ab hints gf 2>/dev/null
rm -rf $OUT/ab $OUT/hints $OUT/gf
cat $OUT/logs/times.txt $OUT/logs/cost_machine.txt; grep -hE "passed|failed" $OUT/logs/sched_tests.log | tail -1
