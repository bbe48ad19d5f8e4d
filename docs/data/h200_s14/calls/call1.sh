#!/usr/bin/env bash
# Session 14, device call 1 (issue 16): the streamed fused paths with one direction's kernel on its own
# output tile (`composer sweep-fused check --subset stream_axis`, new in this session): the FUSED_TC16 z
# kernel at p = 511 runs 27 % behind x on the same 128x64 tile (ncu, session 5: 4052 against 3180 us, DRAM
# 61 % against 30 %, 11.8 GB against 4.5 GB), and FUSED_TC16 is 3.5 % behind GEMM there (b52: 11328 against
# 10941 us). Each candidate (z, then y, retiled on longer contiguous rows or longer k extents, under both
# block numberings) is validated against the NumPy reference on the point-varying input at the Table S29
# grid, then timed (10 calls) after the shipped table ("base"). Plan: docs/data/h200_s14/plans/sweep_plan_axis.json
# (tracked). The device compiles the kernels (NVRTC). A winner needs `composer bench` interleaved with GEMM (next call).
# Carry: .whl .cache/commit.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/axis
timeout 540 python3 -m composer.cli.main sweep-fused run --orders 511,255,767 \
  --plan docs/data/h200_s14/plans/sweep_plan_axis.json --out $OUT/axis --budget 420 > $OUT/logs/sweep_axis.log 2>&1
t sweep_axis $?
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs axis 2>/dev/null
rm -rf $OUT/axis
cat $OUT/logs/times.txt; grep -E '^\{' $OUT/logs/sweep_axis.log | tail -70
