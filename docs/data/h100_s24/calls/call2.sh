#!/usr/bin/env bash
# Session 24, device call 2. On an H200: session 21's call 2 as committed (issue 16's xfaces / x_pairs / budget
# sweep at p = 7-63, bench, GPU tests, DMMA loops, ncu). On an H100 SXM5 (issue 15, the machine axis
# prospectively): the predictions of docs/data/h100_s24/predictions (committed in b380398 before any bench on an
# H100) scored by `composer bench` of the same paths and orders; the DMMA loops (fixed: blocks the registers cannot
# launch left out) and the copy bandwidth (the datasheet x 0.8833 assumption checked afterwards, not refit).
# Carry: .whl .cache/commit .cache/nvrtc_pin2 .cache/xf_sched (the H200 branch: see call2.sh of h200_s21).
set -o pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then exec bash docs/data/h200_s21/calls/call2.sh; fi
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
timeout 60 python3 tools/dmma_pipe.py --out $OUT/logs/dmma_pipe.json > $OUT/logs/dmma_pipe.log 2>&1; t dmma_pipe $?
cut -c1-200 $OUT/logs/dmma_pipe.log | head -8
timeout 30 python3 tools/measure_bandwidth.py --out $OUT/bench/bandwidth.json > $OUT/logs/bandwidth.log 2>&1; t bw $?
tail -2 $OUT/logs/bandwidth.log | cut -c1-300
timeout 120 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_DFMA,FUSED_TC16 --orders 63,255 \
  --rounds 2 --out $OUT/bench/lo > $OUT/logs/bench_lo.log 2>&1; t bench_lo $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_lo.log | cut -d'|' -f2,3,6,10,11 | head -12
left=$(( 250 - $(elapsed) ))
timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_DFMA,FUSED_TC16 --orders 511 \
  --rounds 2 --out $OUT/bench/hi > $OUT/logs/bench_hi.log 2>&1; t bench_hi $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_hi.log | cut -d'|' -f2,3,6,10,11 | head -6
finish_call bench
