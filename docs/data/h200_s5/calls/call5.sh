#!/usr/bin/env bash
# Session 5, device call F: block_order = "axis" (the blocks sharing a line set numbered
# consecutively). GPU test of the small tables (axis builds included), sweep at p = 511, 255, apply,
# interleaved bench at p = 511, 255, then the p = 767 sweep in the time left.
set -o pipefail
source tools/device_prelude.sh
timeout 60 python3 -m pytest -q -m gpu tests/test_fused_stream.py -p no:cacheprovider > $OUT/logs/gpu_stream.log 2>&1; t gpu_stream $?
timeout 150 python3 -m composer.cli.main sweep-fused run --orders 511,255 --plan .cache/sweep_plan_order.json \
  --out $OUT/order > $OUT/logs/order.log 2>&1; t order $?
python3 -m composer.cli.main sweep-fused apply $OUT/order/sweep.json --schedules schedules > $OUT/logs/apply.log 2>&1; t apply $?
timeout 110 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 255,511 --rounds 2 \
  --out $OUT/bench > $OUT/logs/bench.log 2>&1; t bench $?
LEFT=$(( 520 - $(elapsed) ))
[ $LEFT -gt 60 ] && { timeout $LEFT python3 -m composer.cli.main sweep-fused run --orders 767 --plan .cache/sweep_plan_order.json \
  --out $OUT/order767 > $OUT/logs/order767.log 2>&1; t order767 $?; }
[ -f $OUT/order767/sweep.json ] && python3 -m composer.cli.main sweep-fused apply $OUT/order767/sweep.json --schedules schedules >> $OUT/logs/apply.log 2>&1
cp schedules/p0255.toml schedules/p0511.toml schedules/p0767.toml $OUT/logs/
tar -C $OUT -czf $OUT/results.tgz logs order order767 bench 2>/dev/null
cat $OUT/logs/times.txt $OUT/logs/apply.log; tail -1 $OUT/logs/gpu_stream.log
grep "^| FUSED\|^| GEMM" $OUT/bench/summary.md | cut -c1-110; grep -h '"order"' $OUT/logs/order.log $OUT/logs/order767.log | cut -c1-200
