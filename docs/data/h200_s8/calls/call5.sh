#!/usr/bin/env bash
# Session 8, device call 5: the model's second calibration point for the balance axis. Call 4 showed
# a copy kernel keeps 3.7 TB/s down to 52 SMs (the model's "SMs go, bandwidth stays" holds for a
# streaming kernel) while the p = 63 kernels at 12-35 % occupancy lost 30-45 % of their DRAM
# throughput at 66 SMs: bytes in flight per SM bound them. ncu of the other paths at p = 63 inside a
# 66-SM green context, so that every kernel's per-SM DRAM ceiling is measured.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/prof
COMPOSER_BUILD_DIR=$PWD/.cache/build_bal timeout 200 python3 -m composer.cli.main profile \
  --paths FUSED,FUSED_DFMA,FUSED_TC16,GEMM,GEMM_CUTE --orders 63 --sms 66 --out $OUT/prof/sms66 \
  > $OUT/logs/prof_sms66_rest.log 2>&1; t prof_sms66_rest $?
tar -C $OUT -czf $OUT/results.tgz logs prof 2>/dev/null
rm -rf $OUT/prof
cat $OUT/logs/times.txt
