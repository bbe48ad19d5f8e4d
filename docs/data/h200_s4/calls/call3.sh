#!/usr/bin/env bash
# Session 4, device call C: ncu of the rebuilt CuTe x GEMM (all shapes) against cuBLAS at Nq = 512,
# bench of every path at p = 7..127 with the final schedules, then the whole GPU test suite.
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_GIT_COMMIT=$(cat .cache/commit) COMPOSER_CACHE_DIR=$PWD/.cache/s4
mkdir -p $OUT/logs
t() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> $OUT/logs/times.txt; }
SECT=$(python3 -c "from composer.profile.ncu import SECTIONS; print(' '.join('--section '+s for s in SECTIONS))")
timeout 80 ncu --target-processes all --profile-from-start off --clock-control none --csv --page raw --print-units base \
  --log-file $OUT/logs/gemm_ncu.csv $SECT python3 tools/gemm_micro.py run --build build/sm_90 --sections "bench x p511" --profile \
  --out $OUT/gemm_micro > $OUT/logs/gemm_ncu.log 2>&1; t gemm_ncu $?
python3 -c "
import json
from composer.profile import parse_raw_csv, summarize
rows=[summarize(r).as_dict() for r in parse_raw_csv(open('$OUT/logs/gemm_ncu.csv').read())]
json.dump(rows, open('$OUT/logs/gemm_ncu.json','w'), indent=1)
for k in rows: print(k['kernel'][:40], k['duration_us'], k['registers'], k['binding'], round(k['instructions']/1e6), round(k['shared_wavefronts']/1e6), k['pipes_pct'], k['stalls'])
" > $OUT/logs/gemm_ncu_summary.txt 2>&1
timeout 150 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 7,15,31,63,127 --rounds 2 \
  --out $OUT/bench > $OUT/logs/bench.log 2>&1; t bench $?
LEFT=$(( 555 - ($(date +%s) - T0) ))
COMPOSER_BUILD_DIR=$PWD/build/sm_90_test timeout $LEFT python3 -m pytest -v -m gpu tests/ -p no:cacheprovider --durations=12 \
  > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tar -C $OUT -czf $OUT/results.tgz logs bench gemm_micro 2>/dev/null
cat $OUT/logs/times.txt; cut -c1-300 $OUT/logs/gemm_ncu_summary.txt; grep "^| FUSED\|^| GEMM" $OUT/bench/summary.md | cut -c1-150
grep -E "passed|failed|FAILED|ERROR" $OUT/logs/gpu_tests.log | tail -15
