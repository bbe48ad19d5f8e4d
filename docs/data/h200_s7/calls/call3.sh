#!/usr/bin/env bash
# Session 7, device call 3: composer sweep-carrier at p = 7, 15, 31, 127, 511, 575, 767 (p = 63 and
# 255 ran in call 2): every built carrier x fold x flux variant validated against the NumPy reference
# on the point-varying input at the schedule's validation grid (one reference per order), then timed
# in interleaved rounds; the winners into $OUT/sched. Then GEMM_FUSED with the winners against GEMM and
# GEMM_CUTE at p = 511 and 575, interleaved, while time is left.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_gf
mkdir -p $OUT/sched $OUT/gf
for order in 7 15 31 127 511 575 767; do
  CALLS=20; [ $order -ge 575 ] && CALLS=8
  L=$(( 430 - $(elapsed) )); [ $L -lt 30 ] && break
  timeout $L python3 -m composer.cli.main sweep-carrier --order $order --calls $CALLS --schedules-dir $OUT/sched \
    > $OUT/logs/carrier_p$order.log 2>&1; t carrier_p$order $?
done
cp -r $OUT/sched $OUT/gf/sched_winners
L=$(( 560 - $(elapsed) )); [ $L -gt 60 ] && { COMPOSER_SCHEDULES=$OUT/sched timeout $L python3 -m composer.cli.main bench \
  --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 2 --out $OUT/gf/bench > $OUT/logs/gf_bench.log 2>&1; t gf_bench $?; }
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs sched gf 2>/dev/null
rm -rf $OUT/gf $OUT/sched
cat $OUT/logs/times.txt; grep -h "^wrote\|error" $OUT/logs/carrier_p*.log
