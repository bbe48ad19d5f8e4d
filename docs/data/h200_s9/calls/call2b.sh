#!/usr/bin/env bash
# Session 9, device call 2b (warm re-run of call 2's last step, which named paths without a p = 575
# schedule): calibration at 132 SMs at p = 575 (GEMM, GEMM_CUTE, GEMM_FUSED: the paths it schedules)
# and p = 767 (every path but FUSED), for GB200, H100 and A100 at every order.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s9
mkdir -p $OUT/prof
for spec in "GEMM,GEMM_CUTE,GEMM_FUSED 575 150" "GEMM_FUSED,GEMM,FUSED_TC16,FUSED_TC,FUSED_DFMA,GEMM_CUTE 767 330"; do
  set -- $spec; to=$3
  [ $(( $(elapsed) + to )) -gt 520 ] && to=$(( 520 - $(elapsed) ))
  [ $to -lt 40 ] && break
  timeout $to python3 -m composer.cli.main profile --paths $1 --orders $2 --out $OUT/prof/cal132 \
    > $OUT/logs/prof_cal132_p$2.log 2>&1; t "prof cal132 $1 $2" $?
done
tar -C $OUT -czf $OUT/results.tgz logs prof 2>/dev/null
rm -rf $OUT/prof
cat $OUT/logs/times.txt; grep -h "rror" $OUT/logs/*.log | head -5
