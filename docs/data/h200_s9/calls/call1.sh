#!/usr/bin/env bash
# Session 9, device call 1: (a) GEMM_FUSED's carrier with epilogue_prefetch = 2, 4 (built in session 8,
# never run): the kernels against their NumPy emulation (.cache/build_pf holds only them), then
# `sweep-carrier --order 511 --tiles` (12 candidates, each validated, interleaved rounds);
# (b) L2-resident copy bandwidth in green contexts (a measured source for the l2_bytes capacity);
# (c) the model's calibration at 132 SMs at p = 7, 15, 31, 127 for every path except the shape-transfer
# targets (FUSED_TC16, GEMM_CUTE at 16x8x4: they are predicted from these counters and measured in a
# later call), GEMM_CUTE all-CuTe at 8x8x4 as the transfer source; (d) the restricted calibration at
# p = 255 on 66 SMs for every path (latency terms; test 2's GEMM_FUSED p = 255 miss had none).
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/prof $OUT/gf $OUT/bw
COMPOSER_BUILD_DIR=$ROOT/.cache/build_pf timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gemm_fused_gpu.py \
  -k every_fused_kernel > $OUT/logs/gf_prefetch_test.log 2>&1; t gf_prefetch_test $?
COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf timeout 150 python3 -m composer.cli.main sweep-carrier --order 511 --tiles \
  --schedules-dir $OUT/gf/sched --out $OUT/gf/tiles511.json > $OUT/logs/tiles511.log 2>&1; t tiles511 $?
timeout 60 python3 tools/measure_bandwidth.py --sms 132,116,98,80,66,44,24,16 --bytes 8388608 --out $OUT/bw/l2_sms.json \
  > $OUT/logs/l2_bandwidth.log 2>&1; t l2_bandwidth $?
P() {  # P TIMEOUT OUTDIR BUILD PATHS ORDERS [OPTIONS...]
  local to=$1 dir=$2 build=$3 paths=$4 orders=$5; shift 5
  [ $(( $(elapsed) + 40 )) -gt 540 ] && return
  COMPOSER_BUILD_DIR=$ROOT/.cache/$build timeout $to python3 -m composer.cli.main profile --paths $paths --orders $orders "$@" \
    --out $OUT/prof/$dir > $OUT/logs/prof_${dir}_${paths//,/+}_${orders//,/+}.log 2>&1; t "prof $dir $paths $orders" $?
}
P 170 cal132 build_cal GEMM,FUSED,FUSED_TC,FUSED_DFMA,GEMM_FUSED 7,15,31
P 110 cal132 build_cal GEMM,FUSED,FUSED_TC,FUSED_DFMA,GEMM_FUSED 127
P 60 cute884 build_cal GEMM_CUTE 7,15,31,127 --option GEMM_CUTE.library=cute --option GEMM_CUTE.mma=8x8x4
P 130 sms66 build_bal GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 255 --sms 66
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs prof gf bw 2>/dev/null
rm -rf $OUT/prof $OUT/gf $OUT/bw
cat $OUT/logs/times.txt; tail -3 $OUT/logs/gf_prefetch_test.log; tail -15 $OUT/logs/tiles511.log; grep -h "rror" $OUT/logs/prof_*.log | head -5
