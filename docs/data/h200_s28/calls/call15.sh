#!/usr/bin/env bash
# Session 28 call 15 (prepared for an H200; about 150 s, H200 only: stops at once on another GPU): the calibration of the
# within-H200 shape transfer (calls 8, 9 and 13 ran it on an H100: 1.4 % median over twelve prospective points). ncu of
# FUSED_TC at p = 15, 31, 63, 127, 255, 511 on its shipped tables compiled by NVRTC 13.5 (.cache/twins135 as the
# schedules, the build .cache/build_twins135: FUSED_TC and its 16x8x4 shape twins as FUSED_TC16, both from this
# machine's NVRTC 13.5). Only the source (FUSED_TC) is profiled: the twins are predicted from these counters
# (`composer model fit ... --machine h200` / `predict --as FUSED_TC16=FUSED_TC`), committed before call 9 (with h200_only) or call 13 runs them.
# Carry: .whl .cache/commit .cache/twins135 .cache/build_twins135. KEEP="docs/data/h200_s28" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/prof
record_gpu
h200_only
export COMPOSER_SCHEDULES=$PWD/.cache/twins135 COMPOSER_BUILD_DIR=$PWD/.cache/build_twins135
timeout 400 python3 -m composer.cli.main profile --paths FUSED_TC --orders 15,31,63,127,255,511 --out $OUT/prof/tc \
  > $OUT/logs/prof.log 2>&1; t prof $?
grep -E "fused_tc|note" $OUT/logs/prof.log | cut -c1-170
finish_call prof
