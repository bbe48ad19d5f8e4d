#!/usr/bin/env bash
# Session 23, device call 1 (issue 14; about 8 minutes): the volume flux overlapped with the first GEMM
# (`overlap_sms`, composer/paths/overlap.py), session 22's call with the reviewer's fixes: confined kernels never
# share a side stream, graphs keep node priorities, the fallback (the last block taking leftover chunks) counted in
# work[2] and reported. Predictions committed before any run (6a8b77d, docs/data/h200_s22/predictions/
# overlap_*_p511.json): GEMM_FUSED p = 511 x0.939-0.960 of its unsplit call at N = 24-56 SMs, GEMM x0.944-0.963.
# Steps: the GPU tests of the overlap (products exact twice in a row and confined to their SMs; the fallback forced
# by a kernel holding the partition; a captured call replayed with the counters reset and the priority kept;
# GEMM and GEMM_FUSED validated with the overlap on small grids: p = 511's validation is the bench's own); at
# p = 511 every variant of both paths validated, then timed interleaved on one resident problem
# (tools/variants_bench.py; `ratio_to_path` is each path's own unsplit call), then p = 255 and 575; the
# scheduler's measurement of the overlap plan (`composer graph --measure`).
# Carry: .whl .cache/commit .cache/build_s22 (`composer build --arch sm_90 --paths GEMM_FUSED --orders
# 15,255,511,575,767 --out .cache/build_s22`).
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s22
mkdir -p $OUT/ov $OUT/graph
timeout 150 python3 -m pytest -q -m gpu tests/test_flux_overlap_gpu.py -k "not 511" > $OUT/logs/gpu_overlap.log 2>&1
t gpu_overlap $?
tail -3 $OUT/logs/gpu_overlap.log; grep -E "^(FAILED|ERROR)|Error|assert" $OUT/logs/gpu_overlap.log | head -20 | cut -c1-220
V="--variant GEMM_FUSED"
for n in 24 32 44 56; do V="$V --variant GEMM_FUSED:overlap_sms=$n"; done
V="$V --variant GEMM"; for n in 24 32 44; do V="$V --variant GEMM:overlap_sms=$n"; done
timeout 200 python3 tools/variants_bench.py --order 511 $V --rounds 3 --calls 3 --out $OUT/ov/p511.json \
  > $OUT/logs/ov511.log 2>&1; t ov511 $?
cut -c1-190 $OUT/logs/ov511.log | tail -12
timeout 70 python3 tools/variants_bench.py --order 255 --variant GEMM_FUSED --variant GEMM_FUSED:overlap_sms=32 \
  --variant GEMM_FUSED:overlap_sms=44 --variant GEMM --variant GEMM:overlap_sms=32 --rounds 3 --calls 10 \
  --out $OUT/ov/p255.json > $OUT/logs/ov255.log 2>&1; t ov255 $?
cut -c1-190 $OUT/logs/ov255.log | tail -6
left=$(( 470 - $(elapsed) ))
[ $left -gt 60 ] && timeout $left python3 -m composer.cli.main graph --path GEMM_FUSED --order 511 --measure --repeats 5 \
  --option GEMM_FUSED.overlap_sms=32 --out $OUT/graph/gf511_ov32.json > $OUT/logs/graph.log 2>&1; t graph $?
left=$(( 560 - $(elapsed) ))
[ $left -gt 70 ] && timeout $left python3 tools/variants_bench.py --order 575 --variant GEMM_FUSED \
  --variant GEMM_FUSED:overlap_sms=32 --variant GEMM --variant GEMM:overlap_sms=32 --rounds 2 --calls 2 \
  --out $OUT/ov/p575.json > $OUT/logs/ov575.log 2>&1; t ov575 $?
finish_call ov graph
cut -c1-190 $OUT/logs/ov575.log 2>/dev/null | tail -5
grep -E "overlap gained|measured call|contention|FALLBACK|priority" $OUT/logs/graph.log
