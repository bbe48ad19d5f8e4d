#!/usr/bin/env bash
# Session 8, device call 6: the second prospective balance test. The model gained (after call 3's
# score) a per-SM DRAM ceiling (call 4's copy kernel) and latency terms from the 66-SM calibration of
# calls 4-5, and the S/E screen a 1 % resolution floor; predictions for 132, 116, 80, 44 and 24 SMs
# at p = 63, 255 (docs/data/h200_s8/model/pro2, model d2626045bee74e9d) were committed before this
# call. Then: the copy-kernel GPU test, and GEMM_FUSED's small-grid GPU test at p = 575, 767.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_bal
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
for N in 132 116 80 44 24; do
  sms=""; [ $N != 132 ] && sms="--sms $N"
  timeout 70 python3 -m composer.cli.main bench --paths $ALL --orders 63,255 --rounds 2 $sms \
    --out $OUT/bal/lo_sms$N > $OUT/logs/bench_lo_sms$N.log 2>&1; t "bench lo_sms$N" $?
done
timeout 40 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_green_gpu.py -k copy_kernel \
  > $OUT/logs/green_copy_test.log 2>&1; t green_copy_test $?
L=$(( 370 - $(elapsed) )); [ $L -gt 60 ] && { COMPOSER_BUILD_DIR=$PWD/.cache/build_gf timeout $L python3 -m pytest -q -m gpu \
  -p no:cacheprovider tests/test_gemm_fused_gpu.py -k "every_order[575] or every_order[767]" > $OUT/logs/gf_gpu_575_767.log 2>&1
  t gf_gpu_575_767 $?; }
tar -C $OUT -czf $OUT/results.tgz logs bal 2>/dev/null
rm -rf $OUT/bal
cat $OUT/logs/times.txt; tail -2 $OUT/logs/green_copy_test.log; tail -3 $OUT/logs/gf_gpu_575_767.log
