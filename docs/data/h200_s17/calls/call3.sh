#!/usr/bin/env bash
# Session 17, device call 3 (issue 16: the evidence for the tables calls 1-2 shipped). (1) ncu (`composer profile`)
# of the shipped FUSED_TC16 tables at p = 255, 511, 767 (D panels with the 128-B L2 hint at 255/767, z along k
# at 511): the binding resource per kernel now. (2) ncu source counters of the p = 255 x and y kernels (the
# L2-tag-bound ones in call 1): per SASS instruction the L2 requests, sectors and stall samples, exported as
# CSV. Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/prof $OUT/src
timeout 240 python3 -m composer.cli.main profile --paths FUSED_TC16 --orders 255,511,767 \
  --out $OUT/prof/tc16 > $OUT/logs/prof.log 2>&1; t prof $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
left=$(( 560 - $(elapsed) ))
[ $left -gt 60 ] && timeout $left $NCU --target-processes all --profile-from-start off --clock-control none \
  -k regex:'fused_tc16_p255_s[01]_' --section SourceCounters --section WarpStateStats --section LaunchStats \
  --section MemoryWorkloadAnalysis_Tables -o $OUT/src/p255 python3 -m composer.profile.target FUSED_TC16 255 \
  > $OUT/logs/ncu_src.log 2>&1; t ncu_src $?
for K in s0_x s1_y; do
  $NCU -i $OUT/src/p255.ncu-rep -k regex:$K --page source --csv --print-source sass > $OUT/src/source_$K.csv 2>>$OUT/logs/ncu_src.log
  t export_$K $?; gzip $OUT/src/source_$K.csv
done
$NCU -i $OUT/src/p255.ncu-rep --page details --csv > $OUT/src/details.csv 2>>$OUT/logs/ncu_src.log; t details $?
rm -f $OUT/src/p255.ncu-rep
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs prof src 2>/dev/null
rm -rf $OUT/prof $OUT/src
cat $OUT/logs/times.txt; tail -14 $OUT/logs/prof.log | cut -c1-230; tail -3 $OUT/logs/ncu_src.log
