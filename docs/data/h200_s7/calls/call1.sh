#!/usr/bin/env bash
# Session 7, device call 1: (a) the re-applied scheduler changes (face flux declared first, non-timing
# fork/done events, EINSUM on the plan's stream, measure closes its events) validated on the GPU, then
# the launch-cost A/B against the hand-written launches (old tree 0b9951d in .cache/old, run from its
# own directory) at p = 7, 15, three alternations; (b) the campaign's GPU test; (c) GEMM_FUSED at
# p = 255 (every variant) and the Table S29 size of p = 127; (d) the overlap pair GEMM_CUTE vs
# GEMM_FUSED (concurrency lost to fusion) with composer graph --measure at p = 7 ... 767.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
export COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf
mkdir -p $OUT/ab $OUT/graph
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > $OUT/logs/gpu.txt 2>&1
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=5 tests/test_sched_gpu.py tests/test_paths_gpu.py \
  tests/test_runtime_gpu.py > $OUT/logs/sched_tests.log 2>&1; t sched_tests $?
for round in 1 2 3; do
  for tree in new old; do
    if [ $tree = old ]; then DIR=$ROOT/.cache/old; else DIR=$ROOT; fi
    (cd $DIR && PYTHONPATH=/tmp/site python3 -c "import composer; print('imports', composer.__file__)" \
      > $OUT/logs/ab_$tree$round.log 2>&1 && PYTHONPATH=/tmp/site timeout 60 python3 -m composer.cli.main bench \
      --paths GEMM,FUSED,FUSED_TC16 --orders 7,15 --rounds 3 --out $OUT/ab/$tree$round >> $OUT/logs/ab_$tree$round.log 2>&1)
    t ab_$tree$round $?
  done
done
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_campaign_gpu.py > $OUT/logs/campaign_test.log 2>&1; t campaign_test $?
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=5 tests/test_gemm_fused_gpu.py \
  -k "every_order[255] or s29_size[127]" > $OUT/logs/gf255.log 2>&1; t gf255 $?
for order in 7 15 31 63 127 255 511 767; do
  L=$(( 560 - $(elapsed) )); [ $L -lt 30 ] && break
  timeout $L python3 -m composer.cli.main graph --path GEMM_CUTE,GEMM_FUSED --order $order --measure \
    --repeats 10 --out $OUT/graph/p$order.json > $OUT/logs/graph_p$order.log 2>&1; t graph_p$order $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs ab graph 2>/dev/null
rm -rf $OUT/ab $OUT/graph
cat $OUT/logs/times.txt; grep imports $OUT/logs/ab_*.log; grep -hE "passed|failed" $OUT/logs/*.log | tail -8
