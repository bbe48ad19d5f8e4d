#!/usr/bin/env bash
# Session 13, balance test 9, prospective. Every path at p = 7, 15, 31, 63, 127, 255 on 120, 40 and 22 SMs
# (counts no test or calibration has run; one in each regime of the model's SM-count form: 120 between the
# 66- and 132-SM calibrations, 40 between the 34- and 66-SM ones, 22 between the 20- and 34-SM ones).
# Predictions docs/data/h200_s13/model/pro9 (model 4b2fae54, docs/data/h200_s12/model/model_h200_s12_current.json)
# and both scoring rules (fixed before this call: family errors per SM band from the current model's
# retrospective errors on tests 1-8, and --measured-resolution 1; docs/data/h200_s13/model/README.md)
# committed before this call.
# Carry: .whl .cache/build_s13bal .cache/commit (.cache/build_s9 filtered to p <= 255 by tools/filter_build.py: the 64 MiB limit).
# About 85 s at 120 SMs, 100-110 s at 40 and 130-145 s at 22 (per SM count in sessions 10-13: 82-89 s at
# 70-112 SMs, 99 s at 42 and 46, 124 s at 26); every run gets at most 180 s of what is left of a 380-s
# budget (test 8's 325 s would leave the 22-SM run about 135 s), none starts with less than 60 s.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s13bal
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
mkdir -p $OUT/bal
for N in 120 40 22; do
  L=$(( 380 - $(elapsed) )); [ $L -lt 60 ] && { t "skip sms$N (budget)" 0; break; }; [ $L -gt 180 ] && L=180
  timeout $L python3 -m composer.cli.main bench --paths $ALL --orders 7,15,31,63,127,255 --rounds 2 --sms $N \
    --out $OUT/bal/sms$N > $OUT/logs/bench_sms$N.log 2>&1; t "bench sms$N" $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs bal 2>/dev/null
rm -rf $OUT/bal
cat $OUT/logs/times.txt
