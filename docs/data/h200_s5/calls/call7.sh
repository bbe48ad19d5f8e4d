#!/usr/bin/env bash
# Session 5, device call H: the other orders' streamed tables transplanted to p = 255 and 127
# (stream_transfer: the p = 511/767 FUSED_TC16 block shape, 128 threads with a 2 x 8 warp tile),
# apply, and the interleaved bench at p = 127, 255 in the time left.
set -o pipefail
source tools/device_prelude.sh
timeout 100 python3 -m composer.cli.main sweep-fused run --orders 255,127 --plan .cache/sweep_plan_transfer.json \
  --out $OUT/transfer > $OUT/logs/transfer.log 2>&1; t transfer $?
python3 -m composer.cli.main sweep-fused apply $OUT/transfer/sweep.json --schedules schedules > $OUT/logs/apply.log 2>&1; t apply $?
LEFT=$(( 185 - $(elapsed) ))
[ $LEFT -gt 30 ] && { timeout $LEFT python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 255,127 --rounds 2 \
  --out $OUT/bench > $OUT/logs/bench.log 2>&1; t bench $?; }
cp schedules/p0127.toml schedules/p0255.toml $OUT/logs/
tar -C $OUT -czf $OUT/results.tgz logs transfer bench 2>/dev/null
cat $OUT/logs/times.txt $OUT/logs/apply.log
grep "^| FUSED\|^| GEMM" $OUT/bench/summary.md | cut -c1-110; grep -h '"order"' $OUT/logs/transfer.log | cut -c1-200
