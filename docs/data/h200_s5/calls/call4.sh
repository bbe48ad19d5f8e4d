#!/usr/bin/env bash
# Session 5, device call D: the GPU tests of the fused paths, runtime and library paths on the final
# schedules (CuTe GPU tests excluded: the device lacks the CuTe DSL and nothing CuTe changed), then
# the interleaved bench at p = 767 (the call-C bench ran out of its 120 s).
set -o pipefail
source tools/device_prelude.sh
timeout 220 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=8 $(grep -l "mark.gpu" tests/*.py | grep -v cute) \
  > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
timeout 330 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 767 --rounds 2 \
  --out $OUT/bench > $OUT/logs/bench.log 2>&1; t bench $?
tar -C $OUT -czf $OUT/results.tgz logs bench 2>/dev/null
cat $OUT/logs/times.txt; tail -3 $OUT/logs/gpu_tests.log; grep -E "passed|failed|error" $OUT/logs/gpu_tests.log | tail -3
grep "^| FUSED\|^| GEMM" $OUT/bench/summary.md | cut -c1-110
