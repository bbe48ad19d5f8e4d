#!/usr/bin/env bash
# Session 28 call 2 (about 420 s, any GPU: an H100 gives relative evidence): issue 16's chunked pipeline
# (`chunk_elements`: the xy|z box kernels launched chunk by chunk on two lanes, z reading q and dqdt back from L2).
# 1. GPU tests of the key on the small non-cubic grids (one element per chunk).
# 2. `composer sweep-fused run` of docs/data/h200_s28/plans/sweep_plan_chunks.json at p = 31, 63 (family `chunks`
#    on the shipped tables, every table validated on the Table S29 grid first; pinned NVRTC 13.5 cubins in
#    .cache/nvrtc_pin5), winners at 1 % into $OUT/sched.
# 3. ncu of FUSED_TC at p = 31 on what was applied (DRAM bytes of the chunked launches), then the bench of GEMM and
#    the fused paths at p = 31, 63 on those tables.
# Call 1 (docs/data/h100_s28/call1) issued the chunked plans eagerly: host-bound (6.5 ms at 64 chunks); the path now
# replays a chunked plan as a captured CUDA graph (Path.capture_plan).
# Carry: .whl .cache/commit .cache/nvrtc_pin5. KEEP="docs/data/h200_s28" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench $OUT/prof
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5
timeout 120 python3 -m pytest -q -m gpu tests/test_fused_chunks.py -k small > $OUT/logs/gpu_tests.log 2>&1
t gpu_tests $?
tail -3 $OUT/logs/gpu_tests.log
sweep_apply docs/data/h200_s28/plans/sweep_plan_chunks.json 31,63 200 0.01
timeout 100 python3 -m composer.cli.main profile --paths FUSED_TC,FUSED_TC16 --orders 31,63 --out $OUT/prof/p31 \
  > $OUT/logs/prof31.log 2>&1; t prof31 $?
grep -E "fused_tc" $OUT/logs/prof31.log | cut -c1-170 | head -12
left=$(( 560 - $(elapsed) ))
[ $left -gt 40 ] && timeout $left python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 \
  --orders 31,63 --rounds 2 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
finish_call sw sched prof bench
