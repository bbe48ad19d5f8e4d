#!/usr/bin/env bash
# Session 3, device call 2: CuTe GPU test suite (new kernels), GEMM vs GEMM_CUTE interleaved bench.
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_GIT_COMMIT=$(cat .cache/commit)
mkdir -p $OUT/logs
COMPOSER_BUILD_DIR=$PWD/build/sm_90_test timeout 200 python3 -m pytest -v -m gpu tests/test_cute_gpu.py -p no:cacheprovider > $OUT/logs/cute_gpu.log 2>&1
echo "cute_gpu rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
LEFT=$(( 330 - ($(date +%s) - T0) ))
COMPOSER_BUILD_DIR=$PWD/build/sm_90 timeout $LEFT python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE \
  --orders 7,15,31,63,127,255,511,575 --rounds 3 --out $OUT/bench_cute > $OUT/logs/bench_cute.log 2>&1
echo "bench rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
tar -C $OUT -czf $OUT/results.tgz logs bench_cute 2>/dev/null
cat $OUT/logs/times.txt; grep -E "passed|failed|PASS|FAIL|Error" $OUT/logs/cute_gpu.log | tail -8; grep -v '^\[' $OUT/logs/bench_cute.log | tail -30
