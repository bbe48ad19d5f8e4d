#!/usr/bin/env bash
# Session 33 call 2 (any GPU; right after call 1 on the warm machine).
# On an H200 (about 500 s): docs/data/h200_s32/calls/call5.sh on this session's re-pinned plan
# (docs/data/h200_s33/plans/sweep_plan_face_links_h100.json: the same 24 candidates, FUSED's face-links tables without
# the compiler barrier, which cost FUSED x1.29 on an H100 in call 1): issue 16 at p = 7 and 15, the H100's findings
# of sessions 28-32 swept against the generic tables, applied at 1 %, A B B A benches with GEMM, ncu.
# Elsewhere (an H100, about 120 s): the machine overlay's GPU tests (p = 7's FUSED_TC and FUSED_TC16 tables now
# without vmapP) and `composer bench` of GEMM and the fused paths at p = 7 and 15 on the overlay, interleaved.
# Carry: .whl .cache (nvrtc_pin9, commit).
set -o pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then PLAN=docs/data/h200_s33/plans/sweep_plan_face_links_h100.json exec bash docs/data/h200_s32/calls/call5.sh; fi
source tools/device_prelude.sh
mkdir -p $OUT/bench
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin9
timeout 150 python3 -m pytest -q -m gpu tests/test_machine_schedules.py -rs > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -3 $OUT/logs/gpu_tests.log
timeout 150 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 --orders 7,15 --rounds 3 \
  --out $OUT/bench/overlay > $OUT/logs/bench.log 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10
finish_call bench
