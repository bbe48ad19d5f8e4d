#!/usr/bin/env bash
# Session 12, device call 1: the model's third restricted calibration, every path at p = 7, 15 and 31 on
# 20 SMs, below every SM count balance test 7 will run (28-90), so that no test point lies under the
# lowest calibration (tests 5 and 6 missed their screened signs exactly there: 30 SMs under the 66-SM
# calibration, 26 under the 34-SM one). p = 31 last: the call may cut it.
# Carry: .whl .cache/build_s9 .cache/commit.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/prof
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
for orders in 7,15 31; do
  L=$(( 570 - $(elapsed) )); [ $L -lt 60 ] && break
  COMPOSER_BUILD_DIR=$ROOT/.cache/build_s9 timeout $L python3 -m composer.cli.main profile --paths $ALL \
    --orders $orders --sms 20 --out $OUT/prof/sms20 > $OUT/logs/prof_sms20_${orders//,/_}.log 2>&1
  t "prof sms20 $orders" $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs prof 2>/dev/null
rm -rf $OUT/prof
cat $OUT/logs/times.txt; grep -h "rror" $OUT/logs/prof_*.log | head -5 || true
