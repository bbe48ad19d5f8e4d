#!/usr/bin/env bash
# Session 3, device call 1: CuTe prefetch comparison, strip sweep (p7/15), full CuTe GPU tests.
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_GIT_COMMIT=$(cat .cache/commit)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
mkdir -p $OUT/logs
echo "start $(( $(date +%s) - T0 ))" > $OUT/logs/times.txt
timeout 170 python3 tools/gemm_micro.py run --build build/sm_90 --build build/sm_90_pf --out $OUT/gm --budget 130 \
  --sections "bench x p511,bench x p127,bench y p127,bench z p127" > $OUT/logs/gm.log 2>&1
echo "gm rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
COMPOSER_CACHE_DIR=$PWD/.cache/fused4 timeout 215 python3 -m composer.cli.main sweep-fused run --orders 7,15 \
  --plan .cache/sweep_plan_strip.json --out $OUT/strip --budget 190 > $OUT/logs/strip.log 2>&1
echo "strip rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
LEFT=$(( 570 - ($(date +%s) - T0) ))
COMPOSER_BUILD_DIR=$PWD/build/sm_90 timeout $LEFT python3 -m pytest -q -x -m gpu tests/test_cute_gpu.py -p no:cacheprovider > $OUT/logs/cute_gpu.log 2>&1
echo "cute_gpu rc=$? $(( $(date +%s) - T0 ))" >> $OUT/logs/times.txt
tar -C $OUT -czf $OUT/results.tgz logs gm strip 2>/dev/null
cat $OUT/logs/times.txt; tail -5 $OUT/logs/cute_gpu.log; tail -30 $OUT/logs/gm.log | cut -c1-200; grep -h '"order"' -r $OUT/strip 2>/dev/null | cut -c1-160 | tail -40
