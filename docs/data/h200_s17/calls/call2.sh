#!/usr/bin/env bash
# Session 17, device call 2 (issue 16). Call 1's winners are in the shipped schedules (p = 255 and 767: D from
# its k-panel copy with the copies' 128-B L2 fetch hint; p = 511: z's blocks numbered along k). (1) `sweep-fused
# run` of docs/data/h200_s17/plans/sweep_plan_call2.json (`sweep-fused check --orders 511 --subset stream_l2`: the
# new 511 table with D's panels and the hints; `--orders 255,767 --subset stream_kpanel`: the new tables' panel
# width and depth with the pointer copies kept, 16-wide panels halving the 64-byte row pieces), applied with --min-gain 0.005 into $OUT/sched. (2) `composer
# bench --paths GEMM,FUSED_TC16 --orders 255,511,767 --rounds 5` (interleaved; FUSED_TC16 faster than GEMM at 511
# and 767 is the target). (3) the GPU tests of the streamed kernels (small tables with every copy key, l2_fetch
# included). Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/sw $OUT/sched $OUT/bench
timeout 250 python3 -m composer.cli.main sweep-fused run --orders 767,511,255 \
  --plan docs/data/h200_s17/plans/sweep_plan_call2.json --out $OUT/sw --budget 200 > $OUT/logs/sweep.log 2>&1
t sweep $?
python3 -m composer.cli.main sweep-fused apply $OUT/sw/sweep.json --schedules-dir $OUT/sched --min-gain 0.005 \
  > $OUT/logs/apply.log 2>&1; t apply $?
if ls $OUT/sched/p*.toml > /dev/null 2>&1; then
  for f in schedules/p0*.toml; do [ -f $OUT/sched/$(basename $f) ] || cp $f $OUT/sched/; done
  export COMPOSER_SCHEDULES=$OUT/sched
fi
timeout 260 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 255,511,767 --rounds 5 \
  --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
unset COMPOSER_SCHEDULES
left=$(( 575 - $(elapsed) ))
[ $left -gt 30 ] && timeout $left python3 -m pytest -q -m gpu tests/test_fused_copies.py tests/test_fused_stream.py \
  > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs sw sched bench 2>/dev/null
rm -rf $OUT/sw $OUT/bench $OUT/sched
cat $OUT/logs/times.txt; cat $OUT/logs/apply.log
grep -E '^\{' $OUT/logs/sweep.log | sed -E 's/"variant": "FUSED_TC16@FUSED_TC16@16x8x[48] box\[1, [0-9]+, [0-9]+\] t[0-9]+ tile\[2, [0-9]+\] /"v": "/' | cut -c1-230
grep -E "^\| (GEMM|FUSED)|ratio|FUSED_TC16/GEMM" $OUT/logs/bench.log | head -20; tail -5 $OUT/logs/gpu_tests.log
