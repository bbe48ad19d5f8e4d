#!/usr/bin/env bash
# Session 4, device call E: the streamed kernels with unrolled panel-copy loops (2.8x fewer hot-loop
# instructions at p = 511 TC16), interleaved with GEMM, then ncu of FUSED_TC16 and FUSED_TC at p = 511.
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_GIT_COMMIT=$(cat .cache/commit) COMPOSER_CACHE_DIR=$PWD/.cache/s5
mkdir -p $OUT/logs
t() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> $OUT/logs/times.txt; }
timeout 30 python3 -m pytest -q -m gpu tests/test_fused_stream.py -p no:cacheprovider > $OUT/logs/gpu_stream.log 2>&1; t gpu_stream $?
timeout 300 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 127,255,511,767 --rounds 2 \
  --out $OUT/bench > $OUT/logs/bench.log 2>&1; t bench $?
P() { [ $(( $(date +%s) - T0 )) -gt 340 ] && return; timeout $1 python3 -m composer.cli.main profile --paths $2 --orders $3 --out $OUT/prof > $OUT/logs/prof_$2_$3.log 2>&1; t "prof $2 $3" $?; }
P 40 FUSED_TC16 511; P 40 FUSED_TC 511
tar -C $OUT -czf $OUT/results.tgz logs bench prof 2>/dev/null
cat $OUT/logs/times.txt; tail -1 $OUT/logs/gpu_stream.log; grep "^| FUSED\|^| GEMM" $OUT/bench/summary.md | cut -c1-150
python3 -c "
import json; d=json.load(open('$OUT/prof/profile.json'))
for k,v in d.items():
    for x in v['kernels']: print(k, x['kernel'], x['duration_us'], x['registers'], x['binding'], x['pipes_pct'], x['units_pct'], x['stalls'], x['instructions'])
" 2>&1 | cut -c1-400
