#!/usr/bin/env bash
# Session 28 call 10 (about 200 s, any GPU): GPU regression tests of what session 28 changed beneath every path: the
# scheduler's resources (a node may name several: KernelNode.resources, used by the overlap and the chunk lanes),
# Path.launch's captured plans, the fused volume template (the chunked kernels' e0; the unchunked sources are pinned
# by the CPU tests). tests/test_sched_gpu.py, tests/test_flux_overlap_gpu.py (GEMM_FUSED from .cache/build_s22, the
# forming GEMM skipped there), the chunked and xyz-cluster tables on the Table S29 grids.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin5. KEEP="docs/data/h200_s28".
set -o pipefail
source tools/device_prelude.sh
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5 COMPOSER_BUILD_DIR=$PWD/.cache/build_s22
timeout 200 python3 -m pytest -q -m gpu tests/test_sched_gpu.py tests/test_flux_overlap_gpu.py \
  > $OUT/logs/gpu_sched.log 2>&1; t gpu_sched $?
tail -4 $OUT/logs/gpu_sched.log
left=$(( 400 - $(elapsed) ))
timeout $left python3 -m pytest -q -m gpu tests/test_fused_chunks.py tests/test_fused_xyz_cluster.py -k "benchmark and (FUSED_TC-31 or FUSED_TC16-15 or FUSED_TC16-63)" \
  > $OUT/logs/gpu_fused.log 2>&1; t gpu_fused $?
tail -4 $OUT/logs/gpu_fused.log
finish_call
