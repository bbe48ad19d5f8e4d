#!/usr/bin/env bash
# Session 12, device call 3: balance test 7, prospective. Every path at p = 7, 15, 31, 63, 127, 255 on
# 90 and 70 SMs (test 7 runs 28, 48, 70 and 90 SMs, counts no test has run, all above the lowest
# restricted calibration, 20 SMs).
# Predictions docs/data/h200_s12/model/pro7 (model 99c8e2b2: the interp SM-count form on the 66-, 34- and 20-SM
# calibrations, one calibration per binary; family errors: its retrospective errors below 66 SMs over tests
# 1-6, docs/data/h200_s12/model/retro_interp/score_below66.json) committed before this call.
# Carry: .whl .cache/build_s9 .cache/commit. About 100-130 s per SM count.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s9
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
mkdir -p $OUT/bal
for N in 90 70; do
  L=$(( 560 - $(elapsed) )); [ $L -lt 60 ] && break; [ $L -gt 200 ] && L=200
  timeout $L python3 -m composer.cli.main bench --paths $ALL --orders 7,15,31,63,127,255 --rounds 2 --sms $N \
    --out $OUT/bal/sms$N > $OUT/logs/bench_sms$N.log 2>&1; t "bench sms$N" $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs bal 2>/dev/null
rm -rf $OUT/bal
cat $OUT/logs/times.txt
