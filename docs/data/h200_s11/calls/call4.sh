#!/usr/bin/env bash
# Session 11 plan, device call 4 (issue 16): the clustered fused kernels (built and emulated in session
# 11, never run): trace clusters at p = 7, 15 (exterior face traces from the neighbours' tiles) and the
# xy|z clusters at p = 127, 255. First the GPU tests: the runtime's cluster probe, then every clustered table
# against the reference on small non-cubic grids (each split axis at p = 15, a cluster of 4 at 31, the
# first cluster candidate of FUSED_TC and FUSED_TC16 at p = 127 and 255); a hang is a cluster-barrier
# bug (the timeout stops it). Only if they pass, the cluster family's sweep at p = 127 and 255 (each
# candidate validated, then timed; the shipped schedule runs first as "base"), from the plan
# `composer sweep-fused check --orders 127,255 --subset cluster --plan docs/data/h200_s11/plans/sweep_plan_cluster.json`
# written on the CPU. A winner then needs `composer bench` interleaved with GEMM (next call).
# Carry: .whl .cache/commit (the plan is tracked). The device compiles the kernels (NVRTC).
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/cluster $OUT/trace_cluster
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_cluster.py tests/test_fused_gpu.py \
  -k "cluster" > $OUT/logs/cluster_tests.log 2>&1; S=$?; t cluster_tests $S
if [ $S -eq 0 ]; then
  # trace clusters at p = 7, 15 first (24 tables of small orders), then the xy|z clusters
  timeout 120 python3 -m composer.cli.main sweep-fused run --orders 7,15 \
    --plan docs/data/h200_s11/plans/sweep_plan_trace_cluster.json --out $OUT/trace_cluster --budget 90 \
    > $OUT/logs/sweep_trace_cluster.log 2>&1; t sweep_trace_cluster $?
  L=$(( 560 - $(elapsed) ))
  [ $L -gt 60 ] && timeout $L python3 -m composer.cli.main sweep-fused run --orders 127,255 \
    --plan docs/data/h200_s11/plans/sweep_plan_cluster.json --out $OUT/cluster --budget $(( L - 60 )) > $OUT/logs/sweep_cluster.log 2>&1
  t sweep_cluster $?
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs cluster trace_cluster 2>/dev/null
rm -rf $OUT/cluster $OUT/trace_cluster
cat $OUT/logs/times.txt; tail -4 $OUT/logs/cluster_tests.log; tail -8 $OUT/logs/sweep_trace_cluster.log 2>/dev/null
tail -15 $OUT/logs/sweep_cluster.log 2>/dev/null
