#!/usr/bin/env bash
# Session 15, device call 4 (issue 16). Call 3's ncu put the persistent kernels' loss (call 2: +2.0 to +6.3 %
# at 767) on their instructions (x: 4919 M against 3646 M warp instructions) from 64-bit tile arithmetic per
# panel. Now: 32-bit tile numbers, the staging tile's origin folded into its q and vel pointers once per tile
# (hot loop 201 instructions against 155; call 2's build had 218). (1) The persistent GPU tests. (2) The
# stream_persistent family at 767 for FUSED_TC16, validated, timed after the shipped table
# (docs/data/h200_s15/plans/sweep_plan_persistent2.json). Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/sw
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_fused_stream.py -k "persistent" \
  > $OUT/logs/persistent_gpu_tests.log 2>&1; t persistent_gpu_tests $?
timeout 200 python3 -m composer.cli.main sweep-fused run --orders 767 \
  --plan docs/data/h200_s15/plans/sweep_plan_persistent2.json --out $OUT/sw --budget 100 > $OUT/logs/sweep.log 2>&1
t sweep $?
tar -C $OUT -czf $OUT/results.tgz logs sw 2>/dev/null
rm -rf $OUT/sw
cat $OUT/logs/times.txt; tail -2 $OUT/logs/persistent_gpu_tests.log; grep -E '^\{' $OUT/logs/sweep.log | cut -c1-300
