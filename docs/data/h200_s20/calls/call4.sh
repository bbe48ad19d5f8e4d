#!/usr/bin/env bash
# Session 20, device call 4 (issue 15): the occupancy axis of the shape transfer's source binaries. FUSED_TC's
# shipped tables held to fewer blocks per SM (`--option FUSED_TC.resident=N`: dynamic shared memory padded, the same
# binaries) at the warp counts its 16-row twins hold: p = 31 at 2 and 3 blocks (16x8x8 twin: xy 16 warps, z 24),
# p = 63 at 2 (16x8x4 twin's z: 16 warps), p = 255 at 1 (both twins: 8 warps), p = 511 at 1 (both twins, never run:
# the next prospective test), and FUSED_TC at p = 511 as shipped (the source counters there). First the GPU tests of
# the option (the caps hold, the path validates).
# Carry: .cache/commit .cache/build_shipped.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/prof
export COMPOSER_BUILD_DIR=$PWD/.cache/build_shipped
timeout 120 python3 -m pytest -q -m gpu tests/test_shape_twin.py > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -3 $OUT/logs/gpu_tests.log
prof() {  # prof DIR ORDER [CAP]
  local left=$(( 560 - $(elapsed) ))
  [ $left -lt 40 ] && { t "skip_$1" 0; return; }
  local opt=(); [ -n "$3" ] && opt=(--option FUSED_TC.resident=$3)
  timeout $left python3 -m composer.cli.main profile --paths FUSED_TC --orders $2 "${opt[@]}" \
    --out $OUT/prof/$1 > $OUT/logs/prof_$1.log 2>&1; t "prof_$1" $?
}
prof p255r1 255 1
prof p31r2 31 2
prof p63r2 63 2
prof p511 511
prof p511r1 511 1
prof p31r3 31 3
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
finish_call prof
grep -hE "│ fused" $OUT/logs/prof_*.log | cut -c1-150
