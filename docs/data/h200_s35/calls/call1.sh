#!/usr/bin/env bash
# Session 35 call 1 (H200 only; about 200 s; for the last ~300 s of a session's device time): issue 14's figure,
# `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3` on the shipped schedules (the volume
# flux overlapped, applied in session 26; never benched on the H200 since): the first part of
# docs/data/h200_s26/calls/call3.sh alone. Carry: .whl .cache (build_s22: `composer build --arch sm_90 --paths
# GEMM_CUTE,GEMM_FUSED --orders 511,575,767 --out .cache/build_s22`; commit).
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bench
record_gpu
h200_only
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout ${LIMIT:-175} python3 -m composer.cli.main bench \
  --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1
t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
finish_call bench
