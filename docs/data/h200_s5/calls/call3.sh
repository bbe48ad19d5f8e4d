#!/usr/bin/env bash
# Session 5, device call C: p = 767 sweep (FUSED_TC on 16-value panels, FUSED_TC16 with paired
# fragment loads), apply, interleaved bench at p = 767, ncu of the new p = 511 / 255 schedules.
set -o pipefail
source tools/device_prelude.sh
timeout 250 python3 -m composer.cli.main sweep-fused run --orders 767 --plan .cache/sweep_plan_767.json \
  --out $OUT/s767 > $OUT/logs/s767.log 2>&1; t s767 $?
python3 -m composer.cli.main sweep-fused apply $OUT/s767/sweep.json --schedules schedules > $OUT/logs/apply.log 2>&1; t apply $?
timeout 120 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 767 --rounds 2 \
  --out $OUT/bench > $OUT/logs/bench.log 2>&1; t bench $?
P() { [ $(( $(date +%s) - T0 )) -gt 500 ] && return; timeout $1 python3 -m composer.cli.main profile --paths $2 --orders $3 --out $OUT/prof > $OUT/logs/prof_$2_$3.log 2>&1; t "prof $2 $3" $?; }
P 45 FUSED_TC16 511; P 45 FUSED_TC 511; P 35 FUSED_TC16 255
cp schedules/p0767.toml $OUT/logs/
tar -C $OUT -czf $OUT/results.tgz logs s767 bench prof 2>/dev/null
cat $OUT/logs/times.txt $OUT/logs/apply.log
grep "^| FUSED\|^| GEMM" $OUT/bench/summary.md | cut -c1-110; grep '"order"' $OUT/logs/s767.log | cut -c1-200
python3 -c "
import json; d=json.load(open('$OUT/prof/profile.json'))
for k,v in d.items():
    for x in v['kernels']: print(k, x['kernel'], x['duration_us'], x['registers'], x['binding'], x['pipes_pct'], x['units_pct'], x['stalls'], x['instructions'])
" 2>&1 | cut -c1-400
