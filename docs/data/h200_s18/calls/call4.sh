#!/usr/bin/env bash
# Session 18, device call 4 (prepared, not run; issue 16): every fused table on the compiler it names, in ONE
# interleaved bench. COMPOSER_BUILD_DIR = the NVRTC 13.5 build (`composer build --arch sm_90 --paths FUSED,FUSED_TC,
# FUSED_DFMA,FUSED_TC16 --out .cache/build_n135` here): the tables that name 13.5 load their kernels from it, those
# that name 13.0 compile with the device's NVRTC 13.0 (composer.fused.builder.prebuilt checks the manifest's
# compiler); each run records its kernels' origin. (1) `composer bench` of GEMM and the four fused paths at
# p = 7-255, 3 rounds; (2) GEMM,FUSED_TC16 at 511 and 767, 3 rounds. Carry: .whl .cache/commit .cache/build_n135.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135
mkdir -p $OUT/bench
timeout 260 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 \
  --orders 7,15,31,63,127,255 --rounds 3 --out $OUT/bench/small > $OUT/logs/bench_small.log 2>&1; t bench_small $?
left=$(( 570 - $(elapsed) ))
[ $left -gt 120 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 511,767 \
  --rounds 3 --out $OUT/bench/large > $OUT/logs/bench_large.log 2>&1; t bench_large $?
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs bench 2>/dev/null
rm -rf $OUT/bench
cat $OUT/logs/times.txt
grep -h "^note:" $OUT/logs/bench_*.log | sort | uniq -c | head
for f in $OUT/logs/bench_*.log; do grep -E "^\| (GEMM|FUSED)" $f | cut -d'|' -f2,3,6,10,11; done
