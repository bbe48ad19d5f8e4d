#!/usr/bin/env bash
# Session 9, device call 2 (tree 347e1ce, where the predictions below were committed first):
# (a) balance test 3, prospective: every path at p = 63, 255 on 132, 124, 106, 88, 58, 38 SMs
#     (predictions docs/data/h200_s9/model/pro3, model ab55be5f8be2fec6, overlap K = 4);
# (b) the shape transfers, prospective: FUSED_TC16 with FUSED_TC at p = 7, 15, 31 and GEMM_CUTE all-CuTe
#     at 16x8x4 with GEMM at p = 7, 15, 31, 127 (predictions docs/data/h200_s9/model/shape);
# (c) calibration of the 16x8x4 paths at p = 7 ... 127 (FUSED_TC16, GEMM_CUTE shipped, GEMM_CUTE all-CuTe
#     16x8x4) and of every path at p = 575 (GB200, H100, A100 at every order), time permitting.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
export COMPOSER_BUILD_DIR=$ROOT/.cache/build_s9
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
mkdir -p $OUT/bal $OUT/shape $OUT/prof
for N in 132 124 106 88 58 38; do
  sms=""; [ $N != 132 ] && sms="--sms $N"
  timeout 60 python3 -m composer.cli.main bench --paths $ALL --orders 63,255 --rounds 2 $sms \
    --out $OUT/bal/lo_sms$N > $OUT/logs/bench_lo_sms$N.log 2>&1; t "bench lo_sms$N" $?
done
timeout 60 python3 -m composer.cli.main bench --paths FUSED_TC,FUSED_TC16 --orders 7,15,31 --rounds 2 \
  --out $OUT/shape/tc16 > $OUT/logs/shape_tc16.log 2>&1; t shape_tc16 $?
timeout 80 python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE --orders 7,15,31,127 --rounds 2 \
  --option GEMM_CUTE.library=cute --option GEMM_CUTE.mma=16x8x4 --out $OUT/shape/cute16 > $OUT/logs/shape_cute16.log 2>&1; t shape_cute16 $?
P() {  # P TIMEOUT OUTDIR PATHS ORDERS [OPTIONS...]
  local to=$1 dir=$2 paths=$3 orders=$4; shift 4
  [ $(( $(elapsed) + 40 )) -gt 545 ] && return
  [ $(( $(elapsed) + to )) -gt 560 ] && to=$(( 560 - $(elapsed) ))
  timeout $to python3 -m composer.cli.main profile --paths $paths --orders $orders "$@" \
    --out $OUT/prof/$dir > $OUT/logs/prof_${dir}_${paths//,/_}_${orders//,/_}.log 2>&1; t "prof $dir $paths $orders" $?
}
P 90 cal132 FUSED_TC16,GEMM_CUTE 7,15,31,127
P 60 cute1684 GEMM_CUTE 7,15,31,127 --option GEMM_CUTE.library=cute --option GEMM_CUTE.mma=16x8x4
P 200 cal132 GEMM,GEMM_CUTE,GEMM_FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 575
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs bal shape prof 2>/dev/null
rm -rf $OUT/bal $OUT/shape $OUT/prof
cat $OUT/logs/times.txt; grep -h "rror" $OUT/logs/*.log | head -5
