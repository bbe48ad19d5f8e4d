#!/usr/bin/env bash
# Session 8, device call 3: the prospective balance axis, completed. Predictions
# (docs/data/h200_s8/model/predict_h200_sms{132,98,96,66,52,34}.json, model fda2ae8acef569ae, fitted
# on the 132-SM calibration of calls 1-2 and session 6 call 3) were committed before this call.
# composer bench inside green contexts of N SMs (the active SM count read back with %smid in every
# run): p = 63 and 255, every path, at all six SM counts; p = 511 every path (FUSED has no p = 511)
# at 132, 98, 52, and GEMM, GEMM_CUTE, GEMM_FUSED at 96, 66, 34 (session 6 measured the other paths there).
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_bal
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
B() {  # B TIMEOUT LABEL PATHS ORDERS SMS
  [ $(( $(elapsed) + $1 )) -gt 585 ] && return
  local sms=""; [ $5 != 132 ] && sms="--sms $5"
  timeout $1 python3 -m composer.cli.main bench --paths $3 --orders $4 --rounds 2 $sms \
    --out $OUT/bal/$2 > $OUT/logs/bench_$2.log 2>&1; t "bench $2" $?
}
for N in 132 98 52 96 66 34; do B 50 lo_sms$N $ALL 63,255 $N; done
for N in 132 98 52; do B 110 p511_sms$N GEMM,GEMM_CUTE,GEMM_FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 511 $N; done
for N in 96 66 34; do B 80 p511_sms$N GEMM,GEMM_CUTE,GEMM_FUSED 511 $N; done
tar -C $OUT -czf $OUT/results.tgz logs bal 2>/dev/null
rm -rf $OUT/bal
cat $OUT/logs/times.txt
