#!/usr/bin/env bash
# Session 37 call 1 (H200 only, about 400 s; stops at once on another GPU), most wanted first (every step is packed
# into $OUT/results.tgz as it ends):
# 1. p = 7 and 15 (issue 16: 427.4 and 430.9 us against 420 and 400): `composer sweep-fused run` of
#    docs/data/h200_s37/plans/sweep_plan_pair_bricks.json, applied at 1 % into $OUT/sched, then A B B A (A shipped,
#    B applied) of GEMM, FUSED_TC, FUSED_TC16 at 7 and 15. The plan (`sweep-fused check --orders 7,15 --subset
#    pair_bricks,face_links --only '^FUSED_TC.*(xpairs|c2t256)' --pin-nvrtc`): at p = 7 x pairs on bricks
#    (`element_bricks` over the grid of pairs, new this session: FUSED_TC16's paired table on the three ranked bricks,
#    FUSED_TC's x_pairs tables on its own 32 x 8 x 32 brick); at p = 15 the cluster-of-two tables shipped in session 36
#    without vmapP (face links) and on 16 x 2 x 16 bricks, never run on the H200.
# 2. Session 36's call 2: FUSED_DFMA at p = 7 and 15 on the tables applied in session 36 (p = 15's clustered DFMA table
named_bench p767 $left GEMM,GEMM_FUSED 767 2 .cache/build_s22
# Carry: .whl .cache (nvrtc_pin9 with the plan's NVRTC 13.5 kernels and the shipped p = 7 and 15 tables, build_s22, commit).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 ab bench prof
h200_only
LIMIT=${LIMIT:-560}
sweep_apply docs/data/h200_s37/plans/sweep_plan_pair_bricks.json 7,15 140 0.01
B7=${COMPOSER_SCHEDULES:-}
unset COMPOSER_SCHEDULES
[ -n "$B7" ] && ab_benches "$B7" GEMM,FUSED_TC,FUSED_TC16 7,15 100 ab
named_bench dfma 120 FUSED_TC,FUSED_DFMA 7,15 3
left=$(( LIMIT - 40 - $(elapsed) ))
if [ $left -gt 120 ]; then
  named_bench p767 $left GEMM,GEMM_FUSED 767 2 .cache/build_s22
fi
left=$(( LIMIT - $(elapsed) ))
if [ -n "$B7" ] && [ $left -gt 30 ]; then
  COMPOSER_SCHEDULES=$B7 timeout $left $M profile --paths FUSED_TC,FUSED_TC16 --orders 7,15 --out "$OUT/prof/applied" \
    > "$OUT/logs/prof_applied.log" 2>&1; t prof_applied $?
fi
finish_call ab bench prof sw sched
