#!/usr/bin/env bash
# Session 6, device call 4: the prospective balance axis, commit 2's measurements. The predictions
# (docs/data/h200_s6/model/predict_h200_sms*.json) were committed in 0148051 before this call.
# composer bench at p = 255 on the full H200 and inside green contexts of 66 and 34 SMs (96 and
# p = 511 while time is left), the active SM count read back with %smid in every run.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_sm90_884
PATHS=FUSED_TC,FUSED_TC16,FUSED_DFMA,GEMM
B() {  # B TIMEOUT LABEL ORDERS [SMS]
  [ $(( $(elapsed) + $1 )) -gt 330 ] && return
  timeout $1 python3 -m composer.cli.main bench --paths $PATHS --orders $3 --rounds 2 ${4:+--sms $4} \
    --out $OUT/bal/$2 > $OUT/logs/bench_$2.log 2>&1; t "bench $2" $?
}
B 70 p255_sms132 255
B 70 p255_sms66 255 66
B 70 p255_sms34 255 34
B 70 p255_sms96 255 96
B 120 p511_sms66 511 66
tar -C $OUT -czf $OUT/results.tgz logs bal 2>/dev/null
rm -rf $OUT/bal
cat $OUT/logs/times.txt
