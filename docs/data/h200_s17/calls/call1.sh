#!/usr/bin/env bash
# Session 17, device call 1 (issue 16). (1) `sweep-fused run` of docs/data/h200_s17/plans/sweep_plan_l2.json
# (`composer sweep-fused check --orders 127,255,511,767 --subset stream_l2,stream_yz --only '^FUSED_TC16@'`):
# FUSED_TC16's tables with D from its k-panel copy and the copies' L2 fetch-size hint (l2_fetch = 128B / 256B,
# cuBLAS's LTC128B), and at 255-767 the y/z tiles of stream_yz on the 16x8x8 tables (ncu, s16 c3: the 767 y and
# z kernels bound by L2 tag lookups, 80 / 74 %), each validated first. (2) ncu (`composer profile`) of the
# shipped p = 255 FUSED_TC16 table (16x8x8, pointer copies: never profiled). Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/sw $OUT/prof
timeout 480 python3 -m composer.cli.main sweep-fused run --orders 767,511,255,127 \
  --plan docs/data/h200_s17/plans/sweep_plan_l2.json --out $OUT/sw --budget 440 > $OUT/logs/sweep.log 2>&1
t sweep $?
left=$(( 570 - $(elapsed) ))
[ $left -gt 40 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 255 \
  --out $OUT/prof/p255 > $OUT/logs/prof.log 2>&1; t prof $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs sw prof 2>/dev/null
rm -rf $OUT/sw $OUT/prof
cat $OUT/logs/times.txt
grep -E '^\{' $OUT/logs/sweep.log | sed -E 's/"variant": "FUSED_TC16@FUSED_TC16@16x8x[48] box\[1, [0-9]+, [0-9]+\] t[0-9]+ tile\[2, [0-9]+\] /"v": "/' | cut -c1-230
tail -8 $OUT/logs/prof.log | cut -c1-220
