#!/usr/bin/env bash
# Session 4, device call B: bench of the p255/511/767 schedules (4 paths, interleaved), ncu of the
# fastest fused kernels at every missed target and of the CuTe x GEMM against cuBLAS at Nq = 512,
# then the p127 streamed sweep with what is left.
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_GIT_COMMIT=$(cat .cache/commit) COMPOSER_CACHE_DIR=$PWD/.cache/s4
mkdir -p $OUT/logs
t() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> $OUT/logs/times.txt; }
timeout 270 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 255,511,767 --rounds 2 \
  --out $OUT/bench > $OUT/logs/bench.log 2>&1; t bench $?
P() { [ $(( $(date +%s) - T0 )) -gt 430 ] && return; timeout $1 python3 -m composer.cli.main profile --paths $2 --orders $3 --out $OUT/prof > $OUT/logs/prof_$2_$3.log 2>&1; t "prof $2 $3" $?; }
P 60 FUSED_TC16 511; P 60 FUSED_TC 511; P 40 FUSED_TC16 255; P 40 FUSED 7; P 40 FUSED_TC16 127; P 40 FUSED_TC16 63
SECT=$(python3 -c "from composer.profile.ncu import SECTIONS; print(' '.join('--section '+s for s in SECTIONS))")
E=$(( $(date +%s) - T0 )); [ $E -lt 470 ] && timeout $(( 560 - E < 90 ? 560 - E : 90 )) ncu --target-processes all --profile-from-start off --clock-control none --csv --page raw --print-units base \
  --log-file $OUT/logs/gemm_ncu.csv $SECT python3 tools/gemm_micro.py run --build build/sm_90 --sections "bench x p511" --profile \
  --out $OUT/gemm_micro > $OUT/logs/gemm_ncu.log 2>&1; t gemm_ncu $?
python3 -c "
import json,sys
from composer.profile import parse_raw_csv, summarize
rows=parse_raw_csv(open('$OUT/logs/gemm_ncu.csv').read())
json.dump([summarize(r).as_dict() for r in rows], open('$OUT/logs/gemm_ncu.json','w'), indent=1)
for r in rows:
    k=summarize(r).as_dict(); print(k['kernel'][:50], k['duration_us'], k['registers'], k['binding'], k['instructions'], k['shared_wavefronts'], k['pipes_pct'], k['stalls'])
" > $OUT/logs/gemm_ncu_summary.txt 2>&1
LEFT=$(( 540 - ($(date +%s) - T0) ))
[ $LEFT -gt 60 ] && timeout $LEFT python3 -m composer.cli.main sweep-fused run --orders 127 --plan .cache/sweep_plan_stream127.json \
  --out $OUT/sweep127 > $OUT/logs/sweep127.log 2>&1; t sweep127 $?
tar -C $OUT -czf $OUT/results.tgz logs bench prof sweep127 gemm_micro 2>/dev/null
cat $OUT/logs/times.txt; grep "^| FUSED\|^| GEMM" $OUT/bench/summary.md | cut -c1-150; cat $OUT/logs/gemm_ncu_summary.txt | cut -c1-250
python3 -c "
import json; d=json.load(open('$OUT/prof/profile.json'))
for k,v in d.items():
    for x in v['kernels']: print(k, x['kernel'], x['duration_us'], x['binding'], x['pipes_pct'], x['units_pct'])
" 2>&1 | cut -c1-300; grep '"order"' $OUT/logs/sweep127.log | cut -c1-160
