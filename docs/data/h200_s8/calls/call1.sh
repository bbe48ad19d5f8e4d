#!/usr/bin/env bash
# Session 8, device call 1: (a) the cluster-launch and green-context GPU tests; (b) the model's
# calibration at 132 SMs for the paths the balance axis lacks (FUSED, GEMM_FUSED at p = 255, 511;
# every path at p = 63, where ncu crashed in sessions 6 and 7; the profile target now leaves by
# os._exit), one build (.cache/build_bal) for calibration and balance runs; GEMM_CUTE all-CuTe at
# 8x8x4 (the shape-transfer source) and 16x8x4; (c) GEMM_FUSED p = 511 on every carrier tile
# (sweep-carrier --tiles); (d) p = 767 with GEMM_CUTE's three GEMMs on cuBLAS (candidate table in
# .cache/sched767), GEMM, GEMM_CUTE, GEMM_FUSED interleaved.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
BAL=$ROOT/.cache/build_bal
mkdir -p $OUT/prof $OUT/gf
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_cluster.py tests/test_green_gpu.py \
  > $OUT/logs/cluster_green_tests.log 2>&1; t cluster_green_tests $?
P() {  # P TIMEOUT OUTDIR PATHS ORDERS [OPTIONS...]
  local to=$1 dir=$2 paths=$3 orders=$4; shift 4
  [ $(( $(elapsed) + 30 )) -gt 330 ] && return
  COMPOSER_BUILD_DIR=$BAL timeout $to python3 -m composer.cli.main profile --paths $paths --orders $orders "$@" \
    --out $OUT/prof/$dir > $OUT/logs/prof_${dir}_${paths//,/+}_$orders.log 2>&1; t "prof $dir $paths $orders" $?
}
P 100 cal132 FUSED,GEMM_FUSED 255,511
P 150 cal132 FUSED_TC,GEMM_FUSED,FUSED,GEMM_CUTE,FUSED_TC16,GEMM,FUSED_DFMA 63
P 60 cute884 GEMM_CUTE 255,511 --option GEMM_CUTE.library=cute --option GEMM_CUTE.mma=8x8x4
P 60 cute1684 GEMM_CUTE 255,511 --option GEMM_CUTE.library=cute --option GEMM_CUTE.mma=16x8x4
L=$(( 440 - $(elapsed) )); [ $L -gt 60 ] && { COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf timeout $L \
  python3 -m composer.cli.main sweep-carrier --order 511 --tiles --schedules-dir $OUT/gf/sched --out $OUT/gf/tiles511.json \
  > $OUT/logs/tiles511.log 2>&1; t tiles511 $?; }
L=$(( 555 - $(elapsed) )); [ $L -gt 80 ] && { COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf COMPOSER_SCHEDULES=$ROOT/.cache/sched767 \
  timeout $L python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 767 --rounds 2 \
  --out $OUT/gf/p767 > $OUT/logs/gf767.log 2>&1; t gf767 $?; }
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs prof gf 2>/dev/null
rm -rf $OUT/prof $OUT/gf
cat $OUT/logs/times.txt; tail -3 $OUT/logs/cluster_green_tests.log; grep -h "rror" $OUT/logs/prof_*.log | head -5
