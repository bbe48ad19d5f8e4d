#!/usr/bin/env bash
# Session 15, device call 3 (issue 16 evidence). ncu (`composer profile`, --clock-control none, one call after
# a warm-up) of (1) the shipped p = 511 FUSED_TC16 table (session 14's tiles and prefetch, call 1's y product
# operand) and GEMM in the same call; (2) the shipped p = 767 FUSED_TC16 table; (3) the same table with every
# kernel persistent (docs/data/h200_s15/sched_p767_persistent), measured 6.3 % slower in call 2: why.
# Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/prof
timeout 200 python3 -m composer.cli.main profile --paths FUSED_TC16,GEMM --orders 511 --out $OUT/prof/p511 \
  > $OUT/logs/prof511.log 2>&1; t prof511 $?
timeout 150 python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 767 --out $OUT/prof/p767 \
  > $OUT/logs/prof767.log 2>&1; t prof767 $?
COMPOSER_SCHEDULES=$PWD/docs/data/h200_s15/sched_p767_persistent timeout 150 python3 -m composer.cli.main profile \
  --paths FUSED_TC16 --orders 767 --out $OUT/prof/p767p > $OUT/logs/prof767p.log 2>&1; t prof767p $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
tar -C $OUT -czf $OUT/results.tgz logs prof 2>/dev/null
rm -rf $OUT/prof
cat $OUT/logs/times.txt; for f in $OUT/logs/prof*.log; do tail -12 $f | cut -c1-250; done
