#!/usr/bin/env bash
# Session 30 call 1 (any GPU; about 560 s on an H200, 250 s elsewhere). On an H200: session 28's call 6 (issue 16's
# p = 15 xyz-cluster sweep and bench, issue 14's `composer bench --paths GEMM,GEMM_FUSED --orders 511,575`). On any other
# GPU: issue 14 at p = 767 through `composer bench` (the overlap was timed there only by tools/variants_bench.py, x0.965
# of the unsplit call on an H100, session 26): GEMM,GEMM_FUSED with the shipped (unsplit) table, then the same with
# `--option GEMM_FUSED.overlap_sms=32`, each with GEMM as the in-run baseline.
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
for form in unsplit overlap32; do
  opt=(); [ $form = overlap32 ] && opt=(--option GEMM_FUSED.overlap_sms=32)
  timeout 200 python3 -m composer.cli.main bench --paths GEMM,GEMM_FUSED --orders 767 --rounds 2 "${opt[@]}" \
    --out $OUT/bench/$form > $OUT/logs/bench_$form.log 2>&1; t bench_$form $?
  grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench_$form.log | cut -d'|' -f2,3,6,10,11
done
finish_call bench
