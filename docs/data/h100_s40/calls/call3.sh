#!/usr/bin/env bash
# Session 40 call 3 (any GPU; about 450 s, `LIMIT=S` for less): what calls 1-2 left of issue 16's L2 partition question.
# 1. The L2 probe (tools/l2_sides.py) with the matrix form's split for homes and reads, and step 4 (new): the homes
#    of the p = 7 bench problem's eight volume arrays, 256 elements each. Two questions: is own-side reading faster
#    than other-side on a credible split (`own_over_other` > 1), and do an element's arrays share a home
#    (`problem_homes.all_agree` well above `all_agree_if_independent`)? Only then is an element assignment by home
#    (against the far misses, 70 % of the link's sectors) worth building.
# 2. Side queues on the matrix form's split (`sm_sides=lines`): A P P A benches of FUSED_TC and FUSED_TC16 at p = 7,
#    2 rounds, and ncu of P (tools/l2_link.py: the far hits). Calls 1-2 measured one queue, the parity split and
#    the uncorrected reference split: all slower.
# 3. The GPU suite's remainder: part E (C's GEMM_FUSED emulation command until session 40), then part D, as far as
#    LIMIT allows.
# Carry: .whl .cache (nvrtc_pin9 with the queued p = 7 kernels, build_suite, commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-450}
call_start .cache/nvrtc_pin9 l2 sq prof
timeout 120 python3 tools/l2_sides.py --out "$OUT/l2/sides.json" > "$OUT/logs/l2_sides.log" 2>&1; t l2_sides $?
cat "$OUT/logs/l2_sides.log"
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
S=$PWD/docs/data/h200_s39/sched_sideq
lines=(--option FUSED_TC.sm_sides=lines --option FUSED_TC16.sm_sides=lines)
for run in A1 P1 P2 A2; do
  opts=()
  if [[ $run == P* ]]; then export COMPOSER_SCHEDULES=$S; opts=("${lines[@]}"); else unset COMPOSER_SCHEDULES; fi
  timeout 70 $M bench --paths FUSED_TC,FUSED_TC16 --orders 7 --rounds 2 "${opts[@]}" --out "$OUT/sq/$run" \
    > "$OUT/logs/sq_$run.log" 2>&1; t "sq_$run" $?
done
unset COMPOSER_SCHEDULES
python3 tools/compare_benches.py --a "$OUT/sq/A1" "$OUT/sq/A2" --b "$OUT/sq/P1" "$OUT/sq/P2" > "$OUT/logs/sq_AP.log" 2>&1
cat "$OUT/logs/sq_AP.log"; grep -ho '"side_queues":{[^}]*}' "$OUT"/sq/P1/runs.jsonl | sort | uniq -c
COMPOSER_SCHEDULES=$S timeout 60 $M profile --paths FUSED_TC,FUSED_TC16 --orders 7 "${lines[@]}" \
  --out "$OUT/prof/sq" > "$OUT/logs/prof_sq.log" 2>&1; t prof_sq $?
python3 tools/l2_link.py "$OUT"/prof/sq/*.csv 2>&1 | tee "$OUT/logs/l2_link.log"
unset COMPOSER_SCHEDULE_MACHINE COMPOSER_CACHE_DIR
left=$(( LIMIT - $(elapsed) ))
if [ $left -gt 120 ]; then
  timeout $(( left < 170 ? left - 10 : 160 )) bash tools/gpu_suite.sh E; t suite_E $?  # C's emulation command
  tail -2 "$OUT/logs/gpu_suite_E.log"
fi
left=$(( LIMIT - $(elapsed) ))
if [ $left -gt 150 ]; then
  timeout $left bash tools/gpu_suite.sh D; t suite_D $?
  tail -2 "$OUT/logs/gpu_suite_D.log"
fi
finish_call l2 sq prof
