#!/usr/bin/env bash
# Session 9, device call 4: balance test 3b, prospective, at the orders the balance axis had not run
# (p = 7, 15, 31, 127; calibrated in calls 1-2): every path on 132, 100 and 50 SMs. Predictions
# docs/data/h200_s9/model/pro3b (model b52244ed62c21b76, overlap K = 4) committed before this call.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s9
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
mkdir -p $OUT/bal
for N in 132 100 50; do
  sms=""; [ $N != 132 ] && sms="--sms $N"
  L=$(( 400 - $(elapsed) )); [ $L -lt 60 ] && break; [ $L -gt 150 ] && L=150
  timeout $L python3 -m composer.cli.main bench --paths $ALL --orders 7,15,31,127 --rounds 2 $sms \
    --out $OUT/bal/lo_sms$N > $OUT/logs/bench_lo_sms$N.log 2>&1; t "bench lo_sms$N" $?
done
tar -C $OUT -czf $OUT/results.tgz logs bal 2>/dev/null
rm -rf $OUT/bal
cat $OUT/logs/times.txt
