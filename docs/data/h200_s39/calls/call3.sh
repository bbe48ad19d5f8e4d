#!/usr/bin/env bash
# Session 39 call 3 (any GPU; about 440 s): issue 16's side queues at p = 7 (`side_queues`, new this session: each
# block takes its work from the queue of the L2 partition its SM is near, side 0 upwards, side 1 downwards), the
# design the L2 counters point to (FUSED_TC p = 7: 30.4 M sectors over the partition link, 8.9 M of them hits at
# the far side, for 80.2 M requested; h200_s36/call1/prof/applied):
# 1. the L2 partition probe (tools/l2_sides.py): the sides the queues read, the home interleave, own/other reads;
# 2. alternating benches of FUSED_TC and FUSED_TC16 at p = 7, 2 rounds each, A P P A L Z Z L (as far as LIMIT allows): A the schedules as
#    shipped, P/L/Z the same tables with `side_queues = true` (docs/data/h200_s39/sched_sideq) reading the probed
#    map (P), the SM id's parity (L: an arbitrary split of the same size) or one queue in launch order (Z: the
#    queue's own cost); on a GPU other than an H200 the generic tables throughout;
# 3. the GPU tests of the queued tables (every map, twice in a row, the counters reset; each bench above
#    validated its tables first);
# 4. ncu of the queued and the shipped tables (`composer profile`: the L2 fabric, sector and hit counters).
# Carry: .whl .cache (nvrtc_pin9 with the 13.5 kernels of both p = 7 tables, queued and not; commit).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 l2 sq prof
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
S=$PWD/docs/data/h200_s39/sched_sideq
LIMIT=${LIMIT:-440}
timeout 90 python3 tools/l2_sides.py --out "$OUT/l2/sides.json" > "$OUT/logs/l2_sides.log" 2>&1; t l2_sides $?
cat "$OUT/logs/l2_sides.log"
for run in A1 P1 P2 A2 L1 Z1 Z2 L2; do
  [ $(( LIMIT - $(elapsed) )) -gt 60 ] || break  # A P P A first: the comparison that matters
  opts=()
  case $run in
    A*) unset COMPOSER_SCHEDULES ;;
    P*) export COMPOSER_SCHEDULES=$S ;;
    L*) export COMPOSER_SCHEDULES=$S; opts=(--option FUSED_TC.sm_sides=alternate --option FUSED_TC16.sm_sides=alternate) ;;
    Z*) export COMPOSER_SCHEDULES=$S; opts=(--option FUSED_TC.sm_sides=zero --option FUSED_TC16.sm_sides=zero) ;;
  esac
  timeout 70 $M bench --paths FUSED_TC,FUSED_TC16 --orders 7 --rounds 2 "${opts[@]}" --out "$OUT/sq/$run" \
    > "$OUT/logs/sq_$run.log" 2>&1; t "sq_$run" $?
done
unset COMPOSER_SCHEDULES
for b in P L Z; do
  [ -d "$OUT/sq/${b}2" ] || continue
  python3 tools/compare_benches.py --a "$OUT/sq/A1" "$OUT/sq/A2" --b "$OUT/sq/${b}1" "$OUT/sq/${b}2" \
    > "$OUT/logs/sq_A$b.log" 2>&1
  echo "== A against $b"; cat "$OUT/logs/sq_A$b.log"
done
left=$(( LIMIT - $(elapsed) ))
if [ $left -gt 90 ]; then
  timeout $(( left < 150 ? left - 10 : 150 )) python3 -m pytest -v -s -m gpu -p no:cacheprovider \
    tests/test_fused_side_queues.py > "$OUT/logs/pytest_sq.log" 2>&1; t pytest_sq $?
  tail -3 "$OUT/logs/pytest_sq.log"
fi
left=$(( LIMIT - $(elapsed) ))
if [ $left -gt 60 ]; then
  COMPOSER_SCHEDULES=$S timeout $(( left / 2 )) $M profile --paths FUSED_TC,FUSED_TC16 --orders 7 --out "$OUT/prof/sq" \
    > "$OUT/logs/prof_sq.log" 2>&1; t prof_sq $?
  left=$(( LIMIT - $(elapsed) ))
  [ $left -gt 30 ] && { timeout $left $M profile --paths FUSED_TC,FUSED_TC16 --orders 7 --out "$OUT/prof/base" \
    > "$OUT/logs/prof_base.log" 2>&1; t prof_base $?; }
fi
finish_call l2 sq prof
