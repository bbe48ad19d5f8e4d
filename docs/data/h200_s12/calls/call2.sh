#!/usr/bin/env bash
# Session 12, device call 2: balance test 7, prospective. Every path at p = 7, 15, 31, 63, 127, 255 on
# 28 and 48 SMs (test 7 runs 28, 48, 70 and 90 SMs, counts no test has run, all above the lowest
# restricted calibration, 20 SMs), then the five paths without GEMM_FUSED at p = 511 on 48 SMs (GEMM_FUSED's
# shipped p = 511 carrier postdates .cache/build_s9).
# Predictions docs/data/h200_s12/model/pro7 (model 99c8e2b2: the interp SM-count form on the 66-, 34- and 20-SM
# calibrations, one calibration per binary; family errors: its retrospective errors below 66 SMs over tests
# 1-6, docs/data/h200_s12/model/retro_interp/score_below66.json) committed before this call.
# Carry: .whl .cache/build_s9 .cache/commit. About 100-130 s per SM count.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s9
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
mkdir -p $OUT/bal
for N in 28 48; do
  L=$(( 560 - $(elapsed) )); [ $L -lt 60 ] && break; [ $L -gt 200 ] && L=200
  timeout $L python3 -m composer.cli.main bench --paths $ALL --orders 7,15,31,63,127,255 --rounds 2 --sms $N \
    --out $OUT/bal/sms$N > $OUT/logs/bench_sms$N.log 2>&1; t "bench sms$N" $?
done
L=$(( 570 - $(elapsed) ))
if [ $L -ge 60 ]; then
  timeout $L python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,FUSED_TC,FUSED_DFMA,FUSED_TC16 --orders 511 \
    --rounds 2 --sms 48 --out $OUT/bal/p511_sms48 > $OUT/logs/bench_p511_sms48.log 2>&1; t "bench p511 sms48" $?
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs bal 2>/dev/null
rm -rf $OUT/bal
cat $OUT/logs/times.txt
