#!/usr/bin/env bash
# Session 43 call 3 (any GPU, the H200 wanted; `LIMIT=S`, default 560 s): GEMM_FUSED with parity (built in session
# 43 after call 1: every flux split, the non-carriers two half-size GEMMs each, the carrier a whole GEMM on the split
# basis whose epilogue tree merges the split derivatives at each node), then call 2's streamed sweep.
# 1. tests/test_parity_gpu.py -k "gemm_fused_parity or volume_flux_parity": GEMM_FUSED:parity=on with each carrier
#    against the reference (p = 7, 15, 63 small grids, 255 at S29) and the relaxed flux-split check.
# 2. tools/variants_bench.py at p = 511: GEMM, GEMM:parity=on, GEMM_FUSED (its schedule), GEMM_FUSED:parity=on (the
#    schedule's carrier) and GEMM_FUSED:parity=on,carrier=z (2 rounds of 3 calls, each validated first).
# 3. FUSED_TC16's streamed parity sweep at p = 511 and 767 (H200 tables; generic elsewhere), applied at 1 %, and
#    A B B A benches of GEMM and FUSED_TC16 where a table changed, as the time allows.
# Carry: .whl .cache (build_gfp: `composer build --arch sm_90 --orders 7,15,63,255,511 --paths GEMM_FUSED,GEMM_CUTE
# --fused-variants all --out .cache/build_gfp`; nvrtc_pin9 for the plan; commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-560}
call_start .cache/nvrtc_pin9 v sw sched ab
export COMPOSER_BUILD_DIR=$PWD/.cache/build_gfp
timeout 150 python3 -m pytest -v -s -m gpu -p no:cacheprovider tests/test_parity_gpu.py \
  -k "gemm_fused_parity or volume_flux_parity" > "$OUT/logs/parity_tests.log" 2>&1
t parity_tests $?
grep -E "PASSED|FAILED|ERROR|SKIPPED|max.diff" "$OUT/logs/parity_tests.log" | cut -c1-170
tail -1 "$OUT/logs/parity_tests.log"
timeout 170 python3 tools/variants_bench.py --order 511 --variant GEMM --variant GEMM:parity=on --variant GEMM_FUSED \
  --variant GEMM_FUSED:parity=on --variant GEMM_FUSED:parity=on,carrier=z --rounds 2 --calls 3 \
  --out "$OUT/v/p511.json" > "$OUT/logs/v511.log" 2>&1
t v511 $?
tail -6 "$OUT/logs/v511.log"
unset COMPOSER_BUILD_DIR
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
left=$(( LIMIT - 40 - $(elapsed) ))
if [ $left -gt 60 ]; then
  sweep_apply docs/data/h200_s42/plans/sweep_plan_stream_parity_tc16.json 511,767 $(( left < 200 ? left : 200 )) \
    0.01 --timing stages
  grep -E '^\{' "$OUT/logs/sweep.log" | cut -c1-200
  unset COMPOSER_SCHEDULES
  ab_where_applied GEMM,FUSED_TC16
fi
finish_call v sw sched ab
