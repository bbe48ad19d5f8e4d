#!/usr/bin/env bash
# Session 7, device call 2: (a) GEMM at p = 7: the launch plan with measured node times as its
# weights (node_us, session 6 call 2's graph --measure node times: the volume-flux chain becomes
# the main stream, the face flux a side stream, as the hand-written launches had it) against the
# default plan (roofline hints: face flux + lift critical) and the hand-written launches (old tree),
# three alternations; (b) GEMM_FUSED against GEMM, GEMM_CUTE and the fused paths at p = 7 ... 255,
# interleaved; (c) sweep-carrier at p = 63 and 255; (d) ncu of GEMM_FUSED and GEMM_CUTE at p = 63
# and 511, and of FUSED_TC at p = 63 (session 6: ncu exit 11 there, now with ncu's own message).
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
export COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf
HINT="GEMM.node_us=volume_flux:230.6,gemm_x:212.2,gemm_y:877.1,gemm_z:178.9,surface_flux:485.1,lift:244.4"
mkdir -p $OUT/ab $OUT/gf $OUT/prof
for round in 1 2 3; do
  for variant in default measured old; do
    DIR=$ROOT; EXTRA=""
    [ $variant = old ] && DIR=$ROOT/.cache/old
    [ $variant = measured ] && EXTRA="--option $HINT"
    (cd $DIR && PYTHONPATH=/tmp/site timeout 40 python3 -m composer.cli.main bench --paths GEMM --orders 7 --rounds 3 \
      $EXTRA --out $OUT/ab/$variant$round > $OUT/logs/ab_$variant$round.log 2>&1)
    t ab_$variant$round $?
  done
done
timeout 200 python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_TC16 \
  --orders 7,15,31,63,127,255 --rounds 2 --out $OUT/gf/bench > $OUT/logs/gf_bench.log 2>&1; t gf_bench $?
for order in 63 255; do
  L=$(( 420 - $(elapsed) )); [ $L -lt 30 ] && break
  timeout $L python3 -m composer.cli.main sweep-carrier --order $order --schedules-dir $OUT/gf/sched \
    > $OUT/logs/carrier_p$order.log 2>&1; t carrier_p$order $?
done
L=$(( 540 - $(elapsed) )); [ $L -gt 30 ] && { timeout $L python3 -m composer.cli.main profile --paths FUSED_TC --orders 63 \
  --out $OUT/prof/p63 > $OUT/logs/prof_p63.log 2>&1; t prof_fused_tc_p63 $?; }
L=$(( 555 - $(elapsed) )); [ $L -gt 30 ] && { timeout $L python3 -m composer.cli.main profile --paths GEMM_FUSED,GEMM_CUTE \
  --orders 511,63 --out $OUT/prof/gf > $OUT/logs/prof_gf.log 2>&1; t prof_gf $?; }
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs ab gf prof 2>/dev/null
rm -rf $OUT/ab $OUT/gf $OUT/prof
cat $OUT/logs/times.txt; tail -2 $OUT/logs/prof_p63.log; grep "^| " $OUT/logs/gf_bench.log | head -3
