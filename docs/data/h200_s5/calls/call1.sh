#!/usr/bin/env bash
# Prepared in session 4 for the next session's first device call (carry .whl, .cache/commit,
# .cache/sweep_plan_lines.json, this script): the stream_lines sweep (k_panel 16, D panels,
# unrolled copies), apply, interleaved bench, and the small-table GPU test (D panels included).
set -o pipefail
source tools/device_prelude.sh
timeout 40 python3 -m pytest -q -m gpu tests/test_fused_stream.py -p no:cacheprovider > $OUT/logs/gpu_stream.log 2>&1; t gpu_stream $?
timeout 330 python3 -m composer.cli.main sweep-fused run --orders 511,255,127 --plan .cache/sweep_plan_lines.json \
  --out $OUT/lines > $OUT/logs/lines.log 2>&1; t lines $?
python3 -m composer.cli.main sweep-fused apply $OUT/lines/sweep.json --schedules schedules > $OUT/logs/apply.log 2>&1; t apply $?
timeout 170 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 127,255,511 --rounds 2 \
  --out $OUT/bench > $OUT/logs/bench.log 2>&1; t bench $?
cp schedules/p0127.toml schedules/p0255.toml schedules/p0511.toml $OUT/logs/
tar -C $OUT -czf $OUT/results.tgz logs lines bench 2>/dev/null
cat $OUT/logs/times.txt $OUT/logs/apply.log; tail -1 $OUT/logs/gpu_stream.log
grep "^| FUSED\|^| GEMM" $OUT/bench/summary.md | cut -c1-150; grep '"order"' $OUT/logs/lines.log | cut -c1-170
