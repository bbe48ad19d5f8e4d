#!/usr/bin/env bash
# Session 10, device call 2: (a) GEMM_FUSED's carrier with its own store group (8, 16, 32 sites whose
# five array loads are in flight together; the shipped 4 makes the p = 511 epilogue wait for 8 DRAM round
# trips; every L2 prefetch of call 1 ran slower) at p = 511, 575 (its new 64x64x16 4-stage 16x8x8 tile)
# and 767 (with the 575 tile as a candidate), each validated, interleaved rounds, all winners into one
# schedules directory; (b) the restricted calibration call 1 did not finish: p = 31 on 66 SMs for the
# paths it missed.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/prof $OUT/gf
GF() {  # GF TIMEOUT ORDER [OPTIONS...]
  local to=$1 p=$2; shift 2
  COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf timeout $to python3 -m composer.cli.main sweep-carrier --order $p --tiles \
    "$@" --schedules-dir $OUT/gf/sched --out $OUT/gf/groups$p.json > $OUT/logs/groups$p.log 2>&1; t "groups$p" $?
}
GF 100 511 --only .g
GF 110 575 --only .g
P() {  # P TIMEOUT OUTDIR BUILD PATHS ORDERS [OPTIONS...]
  local to=$1 dir=$2 build=$3 paths=$4 orders=$5; shift 5
  COMPOSER_BUILD_DIR=$ROOT/.cache/$build timeout $to python3 -m composer.cli.main profile --paths $paths --orders $orders "$@" \
    --out $OUT/prof/$dir > $OUT/logs/prof_${dir}_${orders//,/_}.log 2>&1; t "prof $dir $paths $orders" $?
}
[ -n "$SKIP_PROF" ] || P 150 sms66_31 build_s9 GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 31 --sms 66
L=$(( 570 - $(elapsed) )); [ $L -gt 240 ] && L=240
[ $L -gt 90 ] && GF $L 767 --only .g --only "tile=bm64.bn64.bk16.w2x2.s4,mma=16x8x8"
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs prof gf 2>/dev/null
rm -rf $OUT/prof $OUT/gf
cat $OUT/logs/times.txt; grep -hE '"winner"|wrote' $OUT/logs/groups*.log; grep -h "rror" $OUT/logs/prof_*.log | head -5
