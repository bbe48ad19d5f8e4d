#!/usr/bin/env bash
# Session 18, device call 2 (issue 16): the same kernel sources compiled by two NVRTCs. The device compiles the
# fused kernels with its NVRTC 13.0.88; `composer build --arch sm_90 --paths FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
# --out .cache/build_n135` compiled them here with NVRTC 13.5.37, whose SASS has shorter hot loops at every order
# (e.g. fused_tc_p31_k0_xy 51 against 69 instructions, fused_p7_k0_xyz 42 against 74) and keeps the streamed
# panel loops rolled where 13.0 unrolls them (fused_tc16_p511_s2_z 399 against 6040, 230 against 254 registers).
# Session 9's runs loaded such a build (COMPOSER_BUILD_DIR) and measured FUSED_TC at p = 31 at 519.8 us where
# every NVRTC-13.0 run measures 610 (s18 c1). Here: `composer bench` of GEMM and the four fused paths at p = 7-255,
# one round per invocation, alternating A (NVRTC 13.0 on the device) and B (the 13.5 build) as A B B A A B; then
# GEMM,FUSED_TC16 at 511 and 767 as A B B A while time is left. Each run records its kernels' origin
# (kernel_origin). Carry: .whl .cache/commit .cache/build_n135.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ab
i=0
for X in A B B A A B; do
  [ $(elapsed) -lt 330 ] || break
  if [ $X = B ]; then export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135; else unset COMPOSER_BUILD_DIR; fi
  timeout 120 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16 \
    --orders 7,15,31,63,127,255 --rounds 1 --out $OUT/ab/small_${X}$i > $OUT/logs/small_${X}$i.log 2>&1
  t small_${X}$i $?; i=$((i+1))
done
i=0
for X in A B B A; do
  [ $(elapsed) -lt 490 ] || break
  if [ $X = B ]; then export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135; else unset COMPOSER_BUILD_DIR; fi
  timeout 80 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 511,767 --rounds 1 \
    --out $OUT/ab/large_${X}$i > $OUT/logs/large_${X}$i.log 2>&1
  t large_${X}$i $?; i=$((i+1))
done
unset COMPOSER_BUILD_DIR
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs ab 2>/dev/null
rm -rf $OUT/ab
cat $OUT/logs/times.txt
for f in $OUT/logs/small_*.log $OUT/logs/large_*.log; do echo "== $f"; grep -E "^\| (GEMM|FUSED)" $f | cut -d'|' -f2,3,6; done
