#!/usr/bin/env bash
# Session 16, device call 2 (issue 16). cuBLAS's p = 767 DGEMM kernels issue DMMA.16x8x8 (SASS of
# libcublasLt 12.9: sm90_xmma_gemm_f64..._tilesize64x128x16_stage3_warpsize2x2x1_tensor16x8x8, the fused
# kernels' 32 x 64 warp tile on 128 threads) at 93-94 % of the tensor pipe; the tuned FUSED_TC16 stream
# tables were never run on 16x8x8. (1) `sweep-fused run` of docs/data/h200_s16/plans/sweep_plan_shape.json
# (stream_shape family: the table on 16x8x8 with its copies, pointers, pointers issued after the first
# k-step, its copies after the first k-step; 127, 255, 511, 767), each validated first. (2) apply
# --min-gain 0.01 into $OUT/sched; bench GEMM,FUSED_TC16 at 255 (the call-1 table, or a new one) and at
# 767 and 511 where a table was applied. Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/sw $OUT/sched $OUT/bench
timeout 300 python3 -m composer.cli.main sweep-fused run --orders 767,511,255,127 \
  --plan docs/data/h200_s16/plans/sweep_plan_shape.json --out $OUT/sw --budget 260 > $OUT/logs/sweep.log 2>&1
t sweep $?
python3 -m composer.cli.main sweep-fused apply $OUT/sw/sweep.json --schedules-dir $OUT/sched --min-gain 0.01 \
  > $OUT/logs/apply.log 2>&1; t apply $?
for p in 0255 0767 0511; do
  if [ -f $OUT/sched/p$p.toml ]; then export COMPOSER_SCHEDULES=$OUT/sched; else unset COMPOSER_SCHEDULES; fi
  [ $p != 0255 ] && [ ! -f $OUT/sched/p$p.toml ] && continue
  left=$(( 570 - $(elapsed) )); [ $left -gt 50 ] || break
  timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders ${p#0} --rounds 3 \
    --out $OUT/bench/p$p > $OUT/logs/bench$p.log 2>&1; t bench$p $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs sw sched bench 2>/dev/null
rm -rf $OUT/sw $OUT/bench
cat $OUT/logs/times.txt; cat $OUT/logs/apply.log
grep -E '^\{' $OUT/logs/sweep.log | sed -E 's/"variant": "FUSED_TC16@FUSED_TC16@16x8x[48] box\[1, [0-9]+, [0-9]+\] t[0-9]+ tile\[2, [48]\] /"v": "/' | cut -c1-200
for f in $OUT/logs/bench*.log; do grep -E "^\| (GEMM|FUSED)" $f; done
