#!/usr/bin/env bash
# Session 14, device call 5.
# (1) The GPU test of the small streamed tables, now also with the z kernel's own numbering and depth
#     (tests/test_fused_stream.py::test_stream_small_tables_match_reference_on_gpu, p = 31, grid 2x1x2).
# (2) Issue 16: why the p = 511 FUSED_TC16 z kernel runs 26 % behind x with no unit above 54 % (call 2): ncu
#     source counters (stall samples per SASS instruction) of the shipped y and z kernels, one tendency call
#     (composer.profile.target, the same target `composer profile` runs), exported per instruction as CSV.
# Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/src
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_fused_stream.py -k small_tables \
  > $OUT/logs/stream_gpu_tests.log 2>&1; t stream_gpu_tests $?
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 240 $NCU --target-processes all --profile-from-start off --clock-control none \
  -k regex:'fused_tc16_p511_s[12]_' --section SourceCounters --section WarpStateStats --section LaunchStats \
  -o $OUT/src/yz python3 -m composer.profile.target FUSED_TC16 511 > $OUT/logs/ncu_src.log 2>&1; t ncu_src $?
for K in s1_y s2_z; do
  $NCU -i $OUT/src/yz.ncu-rep -k regex:$K --page source --csv --print-source sass > $OUT/src/source_$K.csv 2>>$OUT/logs/ncu_src.log
  t export_$K $?
done
$NCU -i $OUT/src/yz.ncu-rep --page details --csv > $OUT/src/details.csv 2>>$OUT/logs/ncu_src.log; t details $?
rm -f $OUT/src/yz.ncu-rep
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs src 2>/dev/null
rm -rf $OUT/src
cat $OUT/logs/times.txt; tail -3 $OUT/logs/stream_gpu_tests.log; tail -5 $OUT/logs/ncu_src.log
