#!/usr/bin/env bash
# Session 30 call 7 (any GPU; about 560 s on an H200, at most 480 s elsewhere). On an H200: session 28's call 6 (issue
# 16's p = 15 xyz-cluster sweep and bench, issue 14's `composer bench --paths GEMM,GEMM_FUSED --orders 511,575`). On any
# other GPU: issue 14 at p = 767 through `composer bench` on the machine's tables (on an H100 its overlay
# schedules/machines/h100_sxm/p0767.toml: the volume flux overlapped on 32 SMs, x0.965 of the unsplit call in session
# 26's tools/variants_bench.py run) and on the generic ones (COMPOSER_SCHEDULE_MACHINE=generic: unsplit), each with GEMM
# as the in-run baseline; provenance.json names each run's schedule file.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5. KEEP="docs/data/h200_s28 docs/data/h200_s29 docs/data/h200_s30" tools/device_slim.sh on.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  CALL_BUDGET_S=560 exec bash docs/data/h200_s28/calls/call6.sh
fi
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5 COMPOSER_BUILD_DIR=$PWD/.cache/build_s22
for tables in machine generic; do
  [ $tables = generic ] && export COMPOSER_SCHEDULE_MACHINE=generic
  left=$(( 470 - $(elapsed) ))
  [ $tables = machine ] && left=$(( left / 2 + 20 ))
  timeout $left python3 -m composer.cli.main bench --paths GEMM,GEMM_FUSED --orders 767 --rounds 2 \
    --out $OUT/bench/$tables > $OUT/logs/bench_$tables.log 2>&1; t bench_$tables $?
  grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_$tables.log | cut -d'|' -f2,3,6,10,11
done
python3 -c "import json; [print(d, json.load(open(f'$OUT/bench/{d}/provenance.json'))['sessions'][-1].get('schedules')) for d in ('machine', 'generic')]" 2>&1 | tail -2
finish_call bench
