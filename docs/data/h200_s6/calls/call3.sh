#!/usr/bin/env bash
# Session 6, device call 3: the model's calibration at 132 SMs. Green-context GPU tests first, then
# Nsight Compute with the model's counters (composer.model.counters.REQUESTED_METRICS) for the
# paths of the balance axis at p = 255, 511 (then 63 while time is left): FUSED_TC, FUSED_DFMA,
# FUSED_TC16, GEMM, and GEMM_CUTE at 8x8x4 (the shape-transfer source) and 16x8x4 (its target).
set -o pipefail
source tools/device_prelude.sh
B884=$PWD/.cache/build_sm90_884; B16=$PWD/.cache/build_sm90
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_green_gpu.py > $OUT/logs/green_tests.log 2>&1; t green_tests $?
P() {  # P TIMEOUT OUTDIR BUILD PATHS ORDERS [OPTION]
  [ $(elapsed) -gt 520 ] && return
  COMPOSER_BUILD_DIR=$3 timeout $1 python3 -m composer.cli.main profile --paths $4 --orders $5 ${6:+--option $6} \
    --out $OUT/$2 > $OUT/logs/prof_$2_$4_$5.log 2>&1; t "prof $2 $4 $5" $?
}
P 150 cal132 $B884 FUSED_TC,FUSED_TC16,GEMM 255,511
P 80 cal132 $B884 GEMM_CUTE 255,511 GEMM_CUTE.mma=8x8x4
P 80 cute16 $B16 GEMM_CUTE 255,511 GEMM_CUTE.mma=16x8x4
P 60 cal132 $B884 FUSED_DFMA 255,511
P 80 cal132 $B884 FUSED_TC,FUSED_TC16,GEMM,FUSED 63
P 40 cal132 $B884 GEMM_CUTE 63 GEMM_CUTE.mma=8x8x4
P 40 cute16 $B16 GEMM_CUTE 63 GEMM_CUTE.mma=16x8x4
tar -C $OUT -czf $OUT/results.tgz logs cal132 cute16 2>/dev/null
rm -rf $OUT/cal132 $OUT/cute16
cat $OUT/logs/times.txt; tail -3 $OUT/logs/green_tests.log
