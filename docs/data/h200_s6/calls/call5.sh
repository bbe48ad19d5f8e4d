#!/usr/bin/env bash
# Session 6, device call 5: (a) the scheduler's launch cost against the hand-written launches, redone
# (call 1's "old" runs imported the new tree: python -m puts the working directory first); the old
# tree (0b9951d, .cache/old) now runs from its own directory, and each run logs which composer it
# imported; (b) GEMM_FUSED: its GPU tests, then interleaved with GEMM and GEMM_CUTE.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
for round in 1 2; do
  for tree in new old; do
    if [ $tree = old ]; then DIR=$ROOT/.cache/old; else DIR=$ROOT; fi
    (cd $DIR && PYTHONPATH=/tmp/site python3 -c "import composer, sys; print('imports', composer.__file__)" \
      > $OUT/logs/ab_$tree$round.log 2>&1 && PYTHONPATH=/tmp/site timeout 60 python3 -m composer.cli.main bench \
      --paths GEMM,FUSED,FUSED_TC16 --orders 7,15 --rounds 3 --out $OUT/ab/$tree$round >> $OUT/logs/ab_$tree$round.log 2>&1)
    t ab_$tree$round $?
  done
done
export COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf
source tools/gemm_fused_device.sh
tar -C $OUT -czf $OUT/results.tgz logs ab gf 2>/dev/null
rm -rf $OUT/ab $OUT/gf
cat $OUT/logs/times.txt; grep imports $OUT/logs/ab_*.log
