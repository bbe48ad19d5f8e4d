#!/usr/bin/env bash
# Session 36 call 1 (H200 only, about 480 s; stops at once on another GPU): the pending H200 items of sessions 33-35 in
# one start, most wanted first (every step is packed into $OUT/results.tgz as it ends, so a call cut off keeps them).
# 1. p = 7 (issue 16): `composer sweep-fused run` of docs/data/h200_s33/plans/sweep_plan_face_links_h100.json at p = 7
#    (session 34's sweep: FUSED_TC linked 424.2 against 431.2 µs shipped, FUSED_TC16 430.3 against 442.7), applied at
#    1 % into $OUT/sched, then A B B A (A shipped, B applied) of GEMM, FUSED_TC, FUSED_TC16.
# 2. p = 15 (issue 16): A B B A of GEMM, FUSED_TC, FUSED_TC16 with B = docs/data/h200_s36/sched15 (the generic p = 15
#    schedule with the H100 overlay's FUSED_TC and FUSED_TC16 tables: xyz over a cluster of two, no vmapM; on the H100
#    x0.903-0.909 of the generic tables; session 34's H200 sweep timed the overlay at 429.6 µs but not the generic
#    table beside it).
# 3. Issue 14: docs/data/h200_s26/calls/call3.sh's steps: `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders
#    511,575 --rounds 3` on the shipped overlap (never benched on the H200), then p = 767's GEMM_FUSED unsplit and
#    overlapped on 32 SMs against GEMM (tools/variants_bench.py, interleaved).
# 4. ncu of the applied p = 7 FUSED_TC and FUSED_TC16, with the time left under LIMIT (default 560 s).
# Carry: .whl .cache (nvrtc_pin9 with the p = 7 plan's and both p = 15 sides' NVRTC 13.5 kernels, build_s22, commit).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 ab ab15 bench ov prof
h200_only
LIMIT=${LIMIT:-560}
sweep_apply docs/data/h200_s33/plans/sweep_plan_face_links_h100.json 7 100 0.01
B7=${COMPOSER_SCHEDULES:-}
unset COMPOSER_SCHEDULES
[ -n "$B7" ] && ab_benches "$B7" GEMM,FUSED_TC,FUSED_TC16 7 80 ab
ab_benches "$PWD/docs/data/h200_s36/sched15" GEMM,FUSED_TC,FUSED_TC16 15 80 ab15
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout 170 $M bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 \
  --rounds 3 --out "$OUT/bench/b" > "$OUT/logs/bench.log" 2>&1; t bench $?
grep -E "^\| (GEMM|FUSED)" "$OUT/logs/bench.log" | cut -d'|' -f2,3,6,10,11
left=$(( LIMIT - 60 - $(elapsed) ))
if [ $left -gt 60 ]; then
  COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout $left python3 tools/variants_bench.py --order 767 \
    --variant GEMM_FUSED:overlap_sms=0 --variant GEMM_FUSED:overlap_sms=32 --variant GEMM --rounds 3 --calls 2 \
    --out "$OUT/ov/p767.json" > "$OUT/logs/ov767.log" 2>&1; t ov767 $?
  grep -E "us +x" "$OUT/logs/ov767.log" | cut -c1-120
fi
left=$(( LIMIT - $(elapsed) ))
if [ -n "$B7" ] && [ $left -gt 30 ]; then
  COMPOSER_SCHEDULES=$B7 timeout $left $M profile --paths FUSED_TC,FUSED_TC16 --orders 7 --out "$OUT/prof/applied" \
    > "$OUT/logs/prof_applied.log" 2>&1; t prof_applied $?
fi
finish_call ab ab15 bench ov prof sw sched
