#!/usr/bin/env bash
# Session 19, device call 3 (issue 16): the binding resource of the small-order fused kernels as they now run
# (every table on its compiler: COMPOSER_BUILD_DIR = the NVRTC 13.5 build of this tree, `composer build --arch sm_90
# --paths FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 --out .cache/build_n135`). (1) `composer profile` of FUSED_TC and
# FUSED_TC16 at p = 7, 15, 31, 63 (p = 63 FUSED_TC16: the d_panel = 16 table applied from call 1); (2) ncu source
# counters of FUSED_TC p = 7 (467 us against the 420 target and the paper's 428) and FUSED_TC16 p = 15 (499/400):
# per SASS instruction the stall samples and L1/L2 requests, as CSV. Carry: .whl .cache/commit .cache/build_n135.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135
mkdir -p $OUT/prof $OUT/src
timeout 200 python3 -m composer.cli.main profile --paths FUSED_TC,FUSED_TC16 --orders 7,15,31,63 \
  --out $OUT/prof/small > $OUT/logs/prof.log 2>&1; t prof $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for spec in "FUSED_TC 7 fused_tc_p7_" "FUSED_TC16 15 fused_tc16_p15_"; do
  set -- $spec
  left=$(( 540 - $(elapsed) )); [ $left -lt 40 ] && break
  timeout $left $NCU --target-processes all --profile-from-start off --clock-control none -k regex:"$3" \
    --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy \
    --section MemoryWorkloadAnalysis_Tables -o $OUT/src/$1_$2 python3 -m composer.profile.target $1 $2 \
    > $OUT/logs/ncu_src_$1_$2.log 2>&1; t ncu_src_$1_$2 $?
  if [ -f $OUT/src/$1_$2.ncu-rep ]; then
    $NCU -i $OUT/src/$1_$2.ncu-rep --page source --csv --print-source sass > $OUT/src/source_$1_$2.csv 2>>$OUT/logs/ncu_src_$1_$2.log
    $NCU -i $OUT/src/$1_$2.ncu-rep --page details --csv > $OUT/src/details_$1_$2.csv 2>>$OUT/logs/ncu_src_$1_$2.log
    gzip $OUT/src/*.csv; rm -f $OUT/src/$1_$2.ncu-rep
  fi
done
finish_call prof src
tail -24 $OUT/logs/prof.log | cut -c1-230
tail -2 $OUT/logs/ncu_src_*.log
