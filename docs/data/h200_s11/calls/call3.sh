#!/usr/bin/env bash
# Session 11 plan, device call 3: the model's second restricted calibration, every path at p = 7, 15 and
# 31 on 34 SMs, so that the SM-scaling form fits its latency demand and eta exponent from two restricted
# SM counts (66 and 34) instead of one (test 4's and the retrospective's remaining misses are the GEMM
# paths below 66 SMs). p = 31 last: the call may cut it (the 66-SM run of all three orders took > 190 s).
# Carry: .whl .cache/build_s9 .cache/commit.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/prof
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
for orders in 7,15 31; do
  L=$(( 560 - $(elapsed) )); [ $L -lt 60 ] && break
  COMPOSER_BUILD_DIR=$ROOT/.cache/build_s9 timeout $L python3 -m composer.cli.main profile --paths $ALL \
    --orders $orders --sms 34 --out $OUT/prof/sms34 > $OUT/logs/prof_sms34_${orders//,/_}.log 2>&1
  t "prof sms34 $orders" $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs prof 2>/dev/null
rm -rf $OUT/prof
cat $OUT/logs/times.txt; grep -h "rror" $OUT/logs/prof_*.log | head -5
