#!/usr/bin/env bash
# Session 29 call 3 (any GPU; about 330 s on an H200, 300 s elsewhere). On an H200: session 28's call 6. On any other GPU:
# that machine's own tables at p = 7, 31, 63 (the seed of its overlay, schedules/machines/<machine>): `composer
# sweep-fused run` of docs/data/h200_s29/plans/sweep_plan_p7_all.json and sweep_plan_p31_63_all.json (`sweep-fused
# check --pin-nvrtc`, default families, seven candidates per variant, cubins in .cache/nvrtc_pin6), each table validated
# and timed against the shipped one in the same run; winners at 2 % into $OUT/sched (`sweep-fused apply --overlay`
# is run here afterwards on the logs).
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5 .cache/nvrtc_pin6.
# KEEP="docs/data/h200_s28 docs/data/h200_s29" tools/device_slim.sh on.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  CALL_BUDGET_S=560 exec bash docs/data/h200_s28/calls/call6.sh
fi
set -o pipefail
source tools/device_prelude.sh
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin6
mkdir -p $OUT/sw7 $OUT/sw3163
timeout 200 python3 -m composer.cli.main sweep-fused run --orders 7 --plan docs/data/h200_s29/plans/sweep_plan_p7_all.json \
  --out $OUT/sw7 --budget 150 > $OUT/logs/sweep7.log 2>&1; t sweep7 $?
timeout 330 python3 -m composer.cli.main sweep-fused run --orders 31,63 --plan docs/data/h200_s29/plans/sweep_plan_p31_63_all.json \
  --out $OUT/sw3163 --budget 280 > $OUT/logs/sweep3163.log 2>&1; t sweep3163 $?
for d in sw7 sw3163; do
  python3 -m composer.cli.main sweep-fused apply $OUT/$d/sweep.json --schedules-dir $OUT/sched --min-gain 0.02 >> $OUT/logs/apply.log 2>&1
done
grep -hE '^\{' $OUT/logs/sweep7.log $OUT/logs/sweep3163.log | cut -c1-200
finish_call sw7 sw3163 sched
