#!/usr/bin/env bash
# Session 10, device call 1: (a) GEMM_FUSED's carrier at p = 511 with the split L2 prefetch of the carry
# epilogue's operands spread over the mainloop (e16s, e64s = the whole mainloop) on the shipped tile and on
# the two-blocks-per-SM library tiles (`sweep-carrier --order 511 --tiles`, 16 candidates, each validated);
# (b) p = 575 on the 16x8x8 library tiles and the split prefetch (`--only`: never swept at 575);
# (c) the model's restricted calibration at p = 7, 15, 31, 127 on 66 SMs for every path (the latency terms
# test 3b missed at 127 on 50 SMs; FUSED_TC16's own latency terms at 7, 31); (d) the L2-resident copy in
# green contexts (the ping-pong copy kernel) and its GPU test; (e) ncu of the p = 511 sweep's winner.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/prof $OUT/gf $OUT/bw
GF() {  # GF TIMEOUT ORDER [OPTIONS...]
  local to=$1 p=$2; shift 2
  COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf timeout $to python3 -m composer.cli.main sweep-carrier --order $p --tiles \
    "$@" --schedules-dir $OUT/gf/sched$p --out $OUT/gf/tiles$p.json > $OUT/logs/tiles$p.log 2>&1; t "tiles$p" $?
}
GF 170 511
GF 110 575 --only mma=16x8x8 --only e64s --only e16s
timeout 60 python3 tools/measure_bandwidth.py --sms 132,116,98,80,66,44,24,16 --bytes 8388608 --out $OUT/bw/l2_sms.json \
  > $OUT/logs/l2_bandwidth.log 2>&1; t l2_bandwidth $?
timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_green_gpu.py -k l2_resident \
  > $OUT/logs/l2_test.log 2>&1; t l2_test $?
P() {  # P TIMEOUT OUTDIR BUILD PATHS ORDERS [OPTIONS...]
  local to=$1 dir=$2 build=$3 paths=$4 orders=$5; shift 5
  [ $(( $(elapsed) + 40 )) -gt 560 ] && return
  COMPOSER_BUILD_DIR=$ROOT/.cache/$build timeout $to python3 -m composer.cli.main profile --paths $paths --orders $orders "$@" \
    --out $OUT/prof/$dir > $OUT/logs/prof_${dir}_${orders//,/_}.log 2>&1; t "prof $dir $paths $orders" $?
}
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
P 190 sms66 build_s9 $ALL 7,15,31 --sms 66
P 90 sms66 build_s9 $ALL 127 --sms 66
if [ -f $OUT/gf/sched511/p0511.toml ]; then export COMPOSER_SCHEDULES=$OUT/gf/sched511; P 60 gf511win build_gf GEMM_FUSED 511; unset COMPOSER_SCHEDULES; fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs prof gf bw 2>/dev/null
rm -rf $OUT/prof $OUT/gf $OUT/bw
cat $OUT/logs/times.txt; tail -3 $OUT/logs/l2_test.log; grep -E '"winner"|wrote' $OUT/logs/tiles*.log; grep -h "rror" $OUT/logs/prof_*.log | head -5
