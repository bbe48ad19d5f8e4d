#!/usr/bin/env bash
# Session 7, device call 4: (a) scheduler GPU tests with the measured node times as plan weights
# (schedules/node_times.toml); (b) launch-cost A/B against the hand-written launches (old tree) at
# p = 7, 15, two alternations; (c) the same tree planned from the times vs from the hints
# (--option P.node_us=hints) for GEMM and GEMM_CUTE at p = 15 ... 127, alternated; (d) GEMM_FUSED with
# the swept schedules against GEMM, GEMM_CUTE, FUSED_TC, FUSED_TC16 at p = 7 ... 255, interleaved;
# (e) p = 511: the y carrier at 16x8x8 on cuBLAS's 64x64x16 4-stage tile against the shipped 16x8x4;
# (f) graph --measure GEMM_CUTE,GEMM_FUSED with the swept schedules (concurrency lost to fusion).
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
export COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf
mkdir -p $OUT/ab $OUT/hints $OUT/gf $OUT/graph $OUT/user
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_sched_gpu.py tests/test_paths_gpu.py \
  > $OUT/logs/sched_tests.log 2>&1; t sched_tests $?
for round in 1 2; do
  for tree in new old; do
    DIR=$ROOT; [ $tree = old ] && DIR=$ROOT/.cache/old
    (cd $DIR && PYTHONPATH=/tmp/site timeout 60 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC16 \
      --orders 7,15 --rounds 3 --out $OUT/ab/$tree$round > $OUT/logs/ab_$tree$round.log 2>&1); t ab_$tree$round $?
  done
done
for round in 1 2; do
  for v in times hints; do
    EXTRA=""; [ $v = hints ] && EXTRA="--option GEMM.node_us=hints --option GEMM_CUTE.node_us=hints"
    timeout 60 python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE --orders 15,31,63,127 --rounds 2 $EXTRA \
      --out $OUT/hints/$v$round > $OUT/logs/hints_$v$round.log 2>&1; t hints_$v$round $?
  done
done
timeout 150 python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,GEMM_FUSED,FUSED_TC,FUSED_TC16 \
  --orders 7,15,31,63,127,255 --rounds 2 --out $OUT/gf/bench > $OUT/logs/gf_bench.log 2>&1; t gf_bench $?
L=$(( 450 - $(elapsed) )); [ $L -gt 40 ] && { timeout $L python3 -m composer.cli.main bench --paths GEMM,GEMM_FUSED \
  --orders 511 --rounds 2 --out $OUT/gf/m884 > $OUT/logs/m884.log 2>&1; t m884 $?; }
L=$(( 500 - $(elapsed) )); [ $L -gt 40 ] && { COMPOSER_SCHEDULES=$ROOT/.cache/sched_exp timeout $L python3 -m composer.cli.main \
  bench --paths GEMM,GEMM_FUSED --orders 511 --rounds 2 --option GEMM_FUSED.build_dir=$ROOT/.cache/build_exp \
  --out $OUT/gf/m888 > $OUT/logs/m888.log 2>&1; t m888 $?; }
for order in 7 63 127 255; do
  L=$(( 560 - $(elapsed) )); [ $L -lt 20 ] && break
  COMPOSER_SCHEDULES=$OUT/user timeout $L python3 -m composer.cli.main graph --path GEMM_CUTE,GEMM_FUSED --order $order \
    --measure --repeats 10 --record-times --out $OUT/graph/p$order.json > $OUT/logs/graph_p$order.log 2>&1; t graph_p$order $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs ab hints gf graph user 2>/dev/null
rm -rf $OUT/ab $OUT/hints $OUT/gf $OUT/graph $OUT/user
cat $OUT/logs/times.txt; grep -hE "passed|failed" $OUT/logs/sched_tests.log | tail -2; tail -2 $OUT/logs/m888.log
