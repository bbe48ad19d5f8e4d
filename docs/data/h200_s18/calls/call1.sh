#!/usr/bin/env bash
# Session 18, device call 1 (issue 16). (1) ncu (`composer profile`) of the shipped FUSED_TC16 tables at p = 255,
# 511, 767 (sessions 16-17: 16x8x8, pointer copies, D panels with the 128-B L2 hint at 255/767, z along k at 511):
# the binding resource per kernel now. (2) `composer bench` of GEMM and the four fused paths at p = 7-127,
# 3 interleaved rounds: the current figures of issue 16's small-order targets (the last all-path run, b71, is of
# session 9). (3) ncu source counters of the p = 255 x and y kernels (L2-tag bound at 12 % occupancy in s17 c1):
# per SASS instruction the L2 requests, sectors and stall samples, exported as CSV. Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/prof $OUT/src $OUT/bench
timeout 170 python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 255,511,767 \
  --out $OUT/prof/tc16 > $OUT/logs/prof.log 2>&1; t prof $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
timeout 230 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 \
  --orders 7,15,31,63,127 --rounds 3 --out $OUT/bench/small > $OUT/logs/bench.log 2>&1; t bench $?
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
left=$(( 560 - $(elapsed) ))
[ $left -gt 60 ] && timeout $left $NCU --target-processes all --profile-from-start off --clock-control none \
  -k regex:'fused_tc16_p255_s[01]_' --section SourceCounters --section WarpStateStats --section LaunchStats \
  --section MemoryWorkloadAnalysis_Tables -o $OUT/src/p255 python3 -m composer.profile.target FUSED_TC16 255 \
  > $OUT/logs/ncu_src.log 2>&1; t ncu_src $?
if [ -f $OUT/src/p255.ncu-rep ]; then
  for K in s0_x s1_y; do
    $NCU -i $OUT/src/p255.ncu-rep -k regex:$K --page source --csv --print-source sass > $OUT/src/source_$K.csv 2>>$OUT/logs/ncu_src.log
    t export_$K $?; gzip $OUT/src/source_$K.csv
  done
  $NCU -i $OUT/src/p255.ncu-rep --page details --csv > $OUT/src/details.csv 2>>$OUT/logs/ncu_src.log; t details $?
  rm -f $OUT/src/p255.ncu-rep
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs prof src bench 2>/dev/null
rm -rf $OUT/prof $OUT/src $OUT/bench
cat $OUT/logs/times.txt; tail -14 $OUT/logs/prof.log | cut -c1-230; tail -3 $OUT/logs/ncu_src.log
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | head -40
