#!/usr/bin/env bash
# Session 11, device call 6: balance test 6,
# prospective. Every path at p = 7, 15, 31, 63, 127, 255 on 62, 36 and 26 SMs (SM counts no test has
# run; between and below the 66- and 34-SM restricted calibrations). Predictions
# docs/data/h200_s11/model/pro6 (model 932f144a047fdb9a: the SM-scaling form fitted on the 66- and 34-SM calibrations; family errors
# of its retrospective errors below 66 SMs over tests 1-5, retro34/score_below66.json) committed before
# this call. Carry: .whl .cache/build_s9 .cache/commit. About 100 s per SM count.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s9
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
mkdir -p $OUT/bal
for N in 62 36 26; do
  L=$(( 540 - $(elapsed) )); [ $L -lt 60 ] && break; [ $L -gt 170 ] && L=170
  timeout $L python3 -m composer.cli.main bench --paths $ALL --orders 7,15,31,63,127,255 --rounds 2 --sms $N \
    --out $OUT/bal/sms$N > $OUT/logs/bench_sms$N.log 2>&1; t "bench sms$N" $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs bal 2>/dev/null
rm -rf $OUT/bal
cat $OUT/logs/times.txt
