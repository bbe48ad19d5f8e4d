#!/usr/bin/env bash
# Session 43 call 1 (any GPU; `LIMIT=S`, default 560 s): every parity decomposition of sessions 41 and 42 validated on
# the GPU first (none has run on one yet), then the one timing that could move the library side most, then the
# streamed sweep. Every variant and table is validated against the reference before it is timed.
# 1. GPU tests at 1e-12: GEMM's parity support kernels on ragged sizes, GEMM:parity=on on small non-cubic grids and
#    the Table S29 sizes, GEMM_CUTE:parity=on on our CuTe kernels (.cache/build_cute) (tests/test_parity_gpu.py);
#    the streamed parity tables (test_fused_stream_parity.py -k tables).
# 2. tools/variants_bench.py at p = 511: GEMM against GEMM:parity=on and GEMM_CUTE:parity=on,library=cute (2 rounds of
#    3 calls; half the GEMM FLOP).
# 3. FUSED_TC16's streamed parity sweep (sweep_plan_stream_parity_tc16.json) at p = 255, then 511 as time allows,
#    applied at 1 %, with A B B A benches of GEMM and FUSED_TC16 where a table changed, if time is left.
# On a GPU other than an H200 the generic fused tables (COMPOSER_SCHEDULE_MACHINE=generic), as the plan was made.
# Carry: .whl .cache (nvrtc_pin9 filled for the plan; build_cute: `composer build --arch sm_90 --orders
# 7,15,63,255,511 --paths GEMM_CUTE --out .cache/build_cute`; commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-560}
call_start .cache/nvrtc_pin9 v sw sched ab
COMPOSER_BUILD_DIR=$PWD/.cache/build_cute timeout 190 python3 -m pytest -v -s -m gpu -p no:cacheprovider \
  tests/test_parity_gpu.py tests/test_fused_stream_parity.py -k "not candidates" \
  > "$OUT/logs/parity_tests.log" 2>&1
t parity_tests $?
grep -E "PASSED|FAILED|ERROR|SKIPPED|max.diff" "$OUT/logs/parity_tests.log" | cut -c1-160
tail -2 "$OUT/logs/parity_tests.log"
COMPOSER_BUILD_DIR=$PWD/.cache/build_cute timeout 130 python3 tools/variants_bench.py --order 511 --variant GEMM \
  --variant GEMM:parity=on --variant GEMM_CUTE:parity=on,library=cute --rounds 2 --calls 3 \
  --out "$OUT/v/p511.json" > "$OUT/logs/v511.log" 2>&1
t v511 $?
tail -5 "$OUT/logs/v511.log"
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
left=$(( LIMIT - 150 - $(elapsed) ))
sweep_apply docs/data/h200_s42/plans/sweep_plan_stream_parity_tc16.json 255,511 $(( left > 20 ? left : 20 )) 0.01 \
  --timing stages
grep -E '^\{' "$OUT/logs/sweep.log" | cut -c1-200
unset COMPOSER_SCHEDULES
CHANGED=$(applied_orders "$OUT/sched")
echo "applied at: ${CHANGED:-none}" | tee -a "$OUT/logs/times.txt"
left=$(( LIMIT - 10 - $(elapsed) ))
if [ -n "$CHANGED" ] && [ $left -gt 100 ]; then
  ab_benches "$OUT/sched" GEMM,FUSED_TC16 "$CHANGED" $(( (left - 20) / 4 )) ab
fi
finish_call v sw sched ab
