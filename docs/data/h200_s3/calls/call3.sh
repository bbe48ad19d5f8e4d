#!/usr/bin/env bash
# Session 3, device call 3: streamed-kernel sweep at p = 511, 255, 767; apply; interleaved bench.
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_GIT_COMMIT=$(cat .cache/commit) COMPOSER_CACHE_DIR=$PWD/.cache/fused5
mkdir -p $OUT/logs
timeout 300 python3 -m composer.cli.main sweep-fused run --orders 511,255,767 --plan .cache/sweep_plan_stream.json \
  --out $OUT/stream --budget 250 > $OUT/logs/stream.log 2>&1
echo "sweep rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
python3 -m composer.cli.main sweep-fused apply $OUT/stream/sweep.json --schedules schedules > $OUT/logs/apply.log 2>&1
echo "apply rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
LEFT=$(( 555 - ($(date +%s) - T0) ))
timeout $LEFT python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 255,511,767 --rounds 2 \
  --out $OUT/bench_tc > $OUT/logs/bench_tc.log 2>&1
echo "bench rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
cp schedules/p0255.toml schedules/p0511.toml schedules/p0767.toml $OUT/logs/
tar -C $OUT -czf $OUT/results.tgz logs stream bench_tc 2>/dev/null
cat $OUT/logs/times.txt $OUT/logs/apply.log; grep -v '^\[' $OUT/logs/bench_tc.log | grep "^|" | cut -c1-150; grep '"order"' $OUT/logs/stream.log | cut -c1-150
