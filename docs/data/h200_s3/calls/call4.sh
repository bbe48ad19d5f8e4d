#!/usr/bin/env bash
# Session 3, device call 4: refine sweep around the streamed schedules (p = 511, 255), apply, bench.
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_GIT_COMMIT=$(cat .cache/commit) COMPOSER_CACHE_DIR=$PWD/.cache/fused5
mkdir -p $OUT/logs
timeout 110 python3 -m composer.cli.main sweep-fused run --orders 511,255 --plan .cache/sweep_plan_refine.json \
  --out $OUT/refine --budget 60 > $OUT/logs/refine.log 2>&1
echo "sweep rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
python3 -m composer.cli.main sweep-fused apply $OUT/refine/sweep.json --schedules schedules > $OUT/logs/apply.log 2>&1
echo "apply rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
LEFT=$(( 165 - ($(date +%s) - T0) ))
timeout $LEFT python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16 --orders 255,511 --rounds 2 \
  --out $OUT/bench_refine > $OUT/logs/bench_refine.log 2>&1
echo "bench rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
cp schedules/p0255.toml schedules/p0511.toml $OUT/logs/
tar -C $OUT -czf $OUT/results.tgz logs refine bench_refine 2>/dev/null
cat $OUT/logs/times.txt $OUT/logs/apply.log; grep "^| FUSED\|^| GEMM" $OUT/bench_refine/summary.md | cut -c1-130; grep '"order"' $OUT/logs/refine.log | cut -c1-160
