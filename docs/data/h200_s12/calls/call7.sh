#!/usr/bin/env bash
# Session 12, device call 7 (issue 14): ncu of GEMM and GEMM_FUSED at p = 575 with the shipped three-block
# carrier (64x64x16 4-stage, min_blocks = 3; schedules/p0575.toml since e7ba945), for the binding resource
# of the carrier against cuBLAS's y GEMM of the same shape (`composer profile`, its sections and the
# model's counters). Carry: .whl .cache/build_s12gf .cache/commit.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/prof
COMPOSER_BUILD_DIR=$ROOT/.cache/build_s12gf timeout 270 python3 -m composer.cli.main profile --paths GEMM,GEMM_FUSED \
  --orders 575 --out $OUT/prof/p575 > $OUT/logs/prof_p575.log 2>&1; t prof_p575 $?
tar -C $OUT -czf $OUT/results.tgz logs prof 2>/dev/null
rm -rf $OUT/prof
cat $OUT/logs/times.txt; tail -30 $OUT/logs/prof_p575.log
