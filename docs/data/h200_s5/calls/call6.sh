#!/usr/bin/env bash
# Session 5, device call G: the shipped p = 767 schedules interleaved with GEMM (FUSED_TC16 now with
# block_order = "axis"), then ncu of FUSED_TC16 at p = 127 if time is left.
set -o pipefail
source tools/device_prelude.sh
timeout 250 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 767 --rounds 2 \
  --out $OUT/bench > $OUT/logs/bench.log 2>&1; t bench $?
[ $(elapsed) -lt 270 ] && { timeout 50 python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 127 --out $OUT/prof > $OUT/logs/prof.log 2>&1; t prof $?; }
tar -C $OUT -czf $OUT/results.tgz logs bench prof 2>/dev/null
cat $OUT/logs/times.txt; grep "^| FUSED\|^| GEMM" $OUT/bench/summary.md | cut -c1-110
python3 -c "
import json; d=json.load(open('$OUT/prof/profile.json'))
for k,v in d.items():
    for x in v['kernels']: print(k, x['kernel'], x['duration_us'], x['registers'], x['occupancy_achieved_pct'], x['binding'], x['pipes_pct'], x['units_pct'], x['stalls'], x['instructions'])
" 2>&1 | cut -c1-420
