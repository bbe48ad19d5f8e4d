#!/usr/bin/env bash
# Session 34 call 3 (H200 only; about 200 s; stops at once on another GPU; its first run, on an H100, ran
# docs/data/h200_s33/calls/call8.sh, the carveout call, docs/data/h100_s34/call1): issue 16 at p = 7 on the generic
# tables. Call 2's sweep (docs/data/h200_s34/call2) had FUSED_TC with the face links at 424.2 against 431.2 µs shipped
# and FUSED_TC16 x pairs without vmapP at 430.3 against 442.7; they are applied to schedules/p0007.toml from that
# sweep (`sweep-fused apply --min-gain 0.01`). This call checks them:
# 1. The GPU tests of the shipped p = 7 tables (tests/test_fused_gpu.py, the small and the benchmark grid).
# 2. Alternating benches A B B A of GEMM, FUSED, FUSED_TC, FUSED_TC16 at p = 7, A the tables as applied, B the tables
#    before (.cache/s34_p7_before/p0007.toml, `git show <parent>:schedules/p0007.toml`).
# 3. ncu of FUSED_TC and FUSED_TC16 at p = 7 with the time left.
# AB_PATHS (default GEMM,FUSED,FUSED_TC,FUSED_TC16) and BUDGET (seconds, default 200) shorten it.
# Carry: .whl .cache (nvrtc_pin9, s34_p7_before, commit).
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
[[ "$GPU" == *H200* ]] || { echo "not an H200 ($GPU): stopping"; exit 0; }
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 ab prof
timeout 60 python3 -m pytest -q -m gpu "tests/test_fused_gpu.py::test_fused_paths_match_reference[7-grid0-small]" \
  "tests/test_fused_gpu.py::test_fused_paths_match_reference[7-grid5-benchmark]" -rs > $OUT/logs/gpu_tests.log 2>&1
t gpu_tests $?; tail -2 $OUT/logs/gpu_tests.log
ab_benches $PWD/.cache/s34_p7_before ${AB_PATHS:-GEMM,FUSED,FUSED_TC,FUSED_TC16} 7 80
left=$(( ${BUDGET:-200} - $(elapsed) ))
[ $left -gt 30 ] && timeout $left $M profile --paths FUSED_TC,FUSED_TC16 --orders 7 --out $OUT/prof/applied \
  > $OUT/logs/prof_applied.log 2>&1; t prof_applied $?
grep -h "fused_tc" $OUT/logs/prof_applied.log | cut -c1-170
finish_call ab prof
