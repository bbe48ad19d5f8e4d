#!/usr/bin/env bash
# Session 10, device call 6: GEMM_FUSED at p = 511 with its 16x8x8 CuTe GEMMs on the 128x64x16 2x2-warp
# 3-stage tile (the x GEMM on it matched cuBLAS in call 5): every carrier x fold x flux variant on its
# schedule tile (sweep-carrier --only tile=shipped; the flux formed in the mainloop now fits), each
# validated, interleaved rounds; then GEMM, GEMM_CUTE and GEMM_FUSED with the winner, interleaved.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/gf
COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf timeout 200 python3 -m composer.cli.main sweep-carrier --order 511 \
  --only tile=shipped --schedules-dir $OUT/gf/sched --out $OUT/gf/variants511.json > $OUT/logs/variants511.log 2>&1
t variants511 $?
L=$(( 250 - $(elapsed) ))
if [ $L -gt 45 ] && [ -f $OUT/gf/sched/p0511.toml ]; then
  COMPOSER_SCHEDULES=$OUT/gf/sched COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf timeout $L python3 -m composer.cli.main bench \
    --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511 --rounds 2 --out $OUT/gf/p511 > $OUT/logs/bench_p511.log 2>&1
  t "bench p511" $?
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs gf 2>/dev/null
rm -rf $OUT/gf
cat $OUT/logs/times.txt; grep -E '"winner"|wrote' $OUT/logs/variants511.log; grep -E "^\| GEMM" $OUT/logs/bench_p511.log | cut -c1-120
