#!/usr/bin/env bash
# Session 29 call 2 (any GPU; about 330 s on an H200, 150 s elsewhere). On an H200: session 28's call 6 (issue 16's p = 15
# xyz cluster sweep, the bench at 15, issue 14's `composer bench --paths GEMM,GEMM_FUSED --orders 511,575`). On any
# other GPU: the machine overlay (schedules/machines/<machine>/, composer.config.machine_schedules) on the GPU: its
# GPU tests (tests/test_machine_schedules.py: the opened GPU loads its overlay; every overlaid table validates on
# the small and Table S29 grids), then `composer bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 15
# --rounds 3` twice, on the machine's tables (the GPU's own overlay) and on the generic ones
# (COMPOSER_SCHEDULE_MACHINE=generic), each with GEMM as the in-run baseline.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5 (the overlay's FUSED_DFMA cubin added in session 29).
# KEEP="docs/data/h200_s28 docs/data/h200_s29" tools/device_slim.sh on.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  CALL_BUDGET_S=560 exec bash docs/data/h200_s28/calls/call6.sh
fi
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5
timeout 200 python3 -m pytest -q -m gpu tests/test_machine_schedules.py > $OUT/logs/pytest.log 2>&1; t pytest $?
tail -3 $OUT/logs/pytest.log
for tables in machine generic; do
  [ $tables = generic ] && export COMPOSER_SCHEDULE_MACHINE=generic
  timeout 150 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC,FUSED_TC16,FUSED_DFMA --orders 15 --rounds 3 \
    --out $OUT/bench/$tables > $OUT/logs/bench_$tables.log 2>&1; t bench_$tables $?
  grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_$tables.log | cut -d'|' -f2,3,6,10,11
done
python3 -c "import json,sys; [print(d, json.load(open(f'$OUT/bench/{d}/provenance.json'))['sessions'][-1].get('schedules')) for d in ('machine','generic')]"
finish_call bench
