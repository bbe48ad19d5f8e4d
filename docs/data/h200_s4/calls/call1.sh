#!/usr/bin/env bash
# Session 4, device call A: product-operand sweep (p511, p255, p767), apply, GPU tests of the
# streamed kernel and of prebuilt fused kernels, bench of the new schedules at p255/p511.
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_GIT_COMMIT=$(cat .cache/commit) COMPOSER_CACHE_DIR=$PWD/.cache/s4
mkdir -p $OUT/logs
t() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> $OUT/logs/times.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/logs/gpu.txt 2>&1
timeout 150 python3 -m composer.cli.main sweep-fused run --orders 511,255 --plan .cache/sweep_plan_product.json \
  --out $OUT/sweep_a > $OUT/logs/sweep_a.log 2>&1; t sweep_a $?
python3 -m composer.cli.main sweep-fused apply $OUT/sweep_a/sweep.json --schedules schedules > $OUT/logs/apply_a.log 2>&1; t apply_a $?
timeout 100 python3 -m pytest -q -m gpu tests/test_fused_stream.py tests/test_build_fused.py -p no:cacheprovider \
  > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
LEFT=$(( 560 - ($(date +%s) - T0) ))
timeout $LEFT python3 -m composer.cli.main sweep-fused run --orders 767 --plan .cache/sweep_plan_product.json \
  --out $OUT/sweep_b > $OUT/logs/sweep_b.log 2>&1; t sweep_b $?
python3 -m composer.cli.main sweep-fused apply $OUT/sweep_b/sweep.json --schedules schedules > $OUT/logs/apply_b.log 2>&1; t apply_b $?
cp schedules/p0255.toml schedules/p0511.toml schedules/p0767.toml $OUT/logs/
tar -C $OUT -czf $OUT/results.tgz logs sweep_a sweep_b 2>/dev/null
cat $OUT/logs/times.txt $OUT/logs/apply_a.log $OUT/logs/apply_b.log; tail -3 $OUT/logs/gpu_tests.log
grep -h '"order"' $OUT/logs/sweep_a.log $OUT/logs/sweep_b.log | sed 's/FUSED_TC[0-9]*@FUSED_TC[0-9]*@//' | cut -c1-150
