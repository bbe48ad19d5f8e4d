#!/usr/bin/env bash
# Session 8, device call 2 (after the shape-transfer predictions were committed): (a) GEMM_FUSED's
# calibration at p = 511 on the carrier tile call 1's sweep chose (128x64x16, 3 stages, 16x8x8);
# (b) the shape transfer's measurement: GEMM_CUTE with all three GEMMs on CuTe at 16x8x4, interleaved
# with GEMM, p = 255, 511 (predicted from the 8x8x4 counters of call 1:
# docs/data/h200_s8/model/predict_shape_cute16.json); (c) the launch plans' node times and the
# concurrency lost to fusion at p = 511 (new carrier tile) and 767 (GEMM_CUTE's new cuBLAS table);
# (d) p = 1023: GEMM_FUSED alone (GEMM does not fit), validated, while time is left.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
export COMPOSER_BUILD_DIR=$ROOT/.cache/build_bal
mkdir -p $OUT/prof $OUT/shape $OUT/graph $OUT/user $OUT/gf
timeout 80 python3 -m composer.cli.main profile --paths GEMM_FUSED --orders 511 --out $OUT/prof/cal132 \
  > $OUT/logs/prof_gf511.log 2>&1; t prof_gf511 $?
timeout 120 python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE --orders 255,511 --rounds 2 \
  --option GEMM_CUTE.library=cute --option GEMM_CUTE.mma=16x8x4 --out $OUT/shape/cute16 > $OUT/logs/shape_cute16.log 2>&1
t shape_cute16 $?
for order in 511 767; do
  L=$(( 300 - $(elapsed) )); [ $L -lt 30 ] && break
  COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf COMPOSER_SCHEDULES=$OUT/user timeout $L python3 -m composer.cli.main graph \
    --path GEMM_CUTE,GEMM_FUSED --order $order --measure --repeats 10 --record-times --out $OUT/graph/p$order.json \
    > $OUT/logs/graph_p$order.log 2>&1; t graph_p$order $?
done
L=$(( 560 - $(elapsed) )); [ $L -gt 150 ] && { COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf timeout $L python3 -m composer.cli.main \
  bench --paths GEMM_FUSED --orders 1023 --rounds 2 --out $OUT/gf/p1023 > $OUT/logs/gf1023.log 2>&1; t gf1023 $?; }
free -g >> $OUT/logs/times.txt
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs prof shape graph user gf 2>/dev/null
rm -rf $OUT/prof $OUT/shape $OUT/graph $OUT/user $OUT/gf
cat $OUT/logs/times.txt; grep "^| " $OUT/logs/shape_cute16.log | head -6; tail -3 $OUT/logs/gf1023.log
