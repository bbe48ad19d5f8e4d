#!/usr/bin/env bash
# Session 10, device call 3: balance test 4, prospective: every path at p = 7, 15, 31, 63, 127, 255 on
# 112, 76 and 42 SMs (SM counts no test has run). Predictions docs/data/h200_s10/model/pro4 (model
# 91e63adb4fcdce64: overlap K = 4, restricted calibrations at every order 7-255 on 66 SMs, the measured L2
# copy curve as the H200's L2 capacity; family errors from tests 3 and 3b) committed before this call.
# Then GEMM_FUSED at p = 575 on its new carrier tile, interleaved with GEMM and GEMM_CUTE, and the L2
# copy GPU test (fixed: the HBM copy's buffer is one pass per launch).
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s9
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
mkdir -p $OUT/bal $OUT/gf
for N in 112 76 42; do
  L=$(( 420 - $(elapsed) )); [ $L -lt 60 ] && break; [ $L -gt 140 ] && L=140
  timeout $L python3 -m composer.cli.main bench --paths $ALL --orders 7,15,31,63,127,255 --rounds 2 --sms $N \
    --out $OUT/bal/sms$N > $OUT/logs/bench_sms$N.log 2>&1; t "bench sms$N" $?
done
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_green_gpu.py -k l2_resident \
  > $OUT/logs/l2_test.log 2>&1; t l2_test $?
L=$(( 560 - $(elapsed) ))
[ $L -gt 60 ] && COMPOSER_BUILD_DIR=$PWD/.cache/build_gf timeout $L python3 -m composer.cli.main bench \
  --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 575 --rounds 2 --out $OUT/gf/p575 > $OUT/logs/bench_p575.log 2>&1 \
  && t "bench p575" 0 || t "bench p575" $?
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs bal gf 2>/dev/null
rm -rf $OUT/bal $OUT/gf
cat $OUT/logs/times.txt; tail -2 $OUT/logs/l2_test.log
