#!/usr/bin/env bash
# Session 20, device call 6 (issue 15): ncu of FUSED_TC at p = 767 as shipped (NVRTC 13.0, compiled on the device):
# the source counters for the third prospective shape-twin test (FUSED_TC's p = 767 table on 16x8x4 and 16x8x8, both
# holding FUSED_TC's warps per SM), predicted from these counters with model_tc_occ_k2.json's form (K = 2, chosen by
# `composer model overlap` on call 2's twins) before call 7 runs the twins.
# Carry: .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/prof
timeout 300 python3 -m composer.cli.main profile --paths FUSED_TC --orders 767 --out $OUT/prof/p767 \
  > $OUT/logs/prof_p767.log 2>&1; t prof_p767 $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
finish_call prof
grep -hE "│ fused" $OUT/logs/prof_p767.log | cut -c1-150
