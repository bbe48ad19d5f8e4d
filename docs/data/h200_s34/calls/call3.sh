#!/usr/bin/env bash
# Session 34 call 3 (about 380 s on an H200; on another GPU it runs docs/data/h200_s33/calls/call8.sh, the carveout
# call): issue 16 at p = 7 on the generic tables.
# 1. `composer sweep-fused run` of docs/data/h200_s33/plans/sweep_plan_face_links_h100.json at p = 7 (call 2's sweep
#    had FUSED_TC linked at 424.2 against 431.2 µs shipped, FUSED_TC16 x-pairs without vmapP at 430.3 against 442.7,
#    but applied nothing: the script passed 1 for 1 % to a fraction), applied at 1 % into $OUT/sched.
# 2. Alternating benches A B B A (A the shipped tables, B $OUT/sched) of GEMM, FUSED, FUSED_TC, FUSED_TC16 at p = 7.
# 3. The carveout's GPU tests (tests/test_fused_carveout.py, never run), then on B tools/variants_bench.py at p = 7:
#    FUSED_TC and FUSED_TC16 at the driver's split and at preferred carveouts of 71 and 57 % (164 and 132 KB of shared
#    memory: 92 and 124 KB of L1; the p = 7 kernels are bound by the L2 and its partition link), interleaved.
# 4. ncu of the applied FUSED_TC and FUSED_TC16 at p = 7 with the time left.
# Carry: .whl .cache (nvrtc_pin9, commit).
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
[[ "$GPU" == *H200* ]] || exec bash docs/data/h200_s33/calls/call8.sh
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 ab v prof
sweep_apply docs/data/h200_s33/plans/sweep_plan_face_links_h100.json 7 100 1
B=${COMPOSER_SCHEDULES:-}
unset COMPOSER_SCHEDULES
[ -n "$B" ] && ab_benches $B GEMM,FUSED,FUSED_TC,FUSED_TC16 7 80
timeout 60 python3 -m pytest -q -m gpu tests/test_fused_carveout.py -rs > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -2 $OUT/logs/gpu_tests.log
COMPOSER_SCHEDULES=${B:-} timeout 120 python3 tools/variants_bench.py --order 7 --variant FUSED_TC \
  --variant FUSED_TC:carveout=71 --variant FUSED_TC:carveout=57 --variant FUSED_TC16 --variant FUSED_TC16:carveout=71 \
  --variant FUSED_TC16:carveout=57 --rounds 3 --calls 3 --out $OUT/v/p7.json > $OUT/logs/v7.log 2>&1; t v7 $?
tail -8 $OUT/logs/v7.log
left=$(( 420 - $(elapsed) ))
[ $left -gt 30 ] && COMPOSER_SCHEDULES=${B:-} timeout $left $M profile --paths FUSED_TC,FUSED_TC16 --orders 7 \
  --out $OUT/prof/applied > $OUT/logs/prof_applied.log 2>&1; t prof_applied $?
grep -h "fused_tc" $OUT/logs/prof_applied.log | cut -c1-170
finish_call ab v prof sw sched
