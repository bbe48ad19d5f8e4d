#!/usr/bin/env bash
# Session 5, device call B: paired (16-byte) fragment loads. GPU test of the small tables (paired
# builds included), the stream_paired sweep at p = 511, 255, 127, apply, interleaved bench.
set -o pipefail
source tools/device_prelude.sh
timeout 60 python3 -m pytest -q -m gpu tests/test_fused_stream.py -p no:cacheprovider > $OUT/logs/gpu_stream.log 2>&1; t gpu_stream $?
timeout 260 python3 -m composer.cli.main sweep-fused run --orders 511,255,127 --plan .cache/sweep_plan_paired.json \
  --out $OUT/paired > $OUT/logs/paired.log 2>&1; t paired $?
python3 -m composer.cli.main sweep-fused apply $OUT/paired/sweep.json --schedules schedules > $OUT/logs/apply.log 2>&1; t apply $?
timeout 170 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 127,255,511 --rounds 2 \
  --out $OUT/bench > $OUT/logs/bench.log 2>&1; t bench $?
cp schedules/p0127.toml schedules/p0255.toml schedules/p0511.toml $OUT/logs/
tar -C $OUT -czf $OUT/results.tgz logs paired bench 2>/dev/null
cat $OUT/logs/times.txt $OUT/logs/apply.log; tail -3 $OUT/logs/gpu_stream.log
grep "^| FUSED\|^| GEMM" $OUT/bench/summary.md | cut -c1-110; grep '"order"' $OUT/logs/paired.log | cut -c1-200
