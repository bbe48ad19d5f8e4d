#!/usr/bin/env bash
# Session 26, device call 2 (about 360 s), issue 14 after call 1 applied the overlapped volume flux at 511 and 575:
# 1. p = 511: the overlap with the staggered carrier (stagger_us = 50, session 25's H100 winner) against the shipped
#    overlap (44 SMs), 38 and 50 SMs, and GEMM_CUTE (cuBLAS's kernels here) with the same overlap, interleaved with
#    GEMM; and the other carriers under the overlap (z with the fold, x first; z; x), on the 128x64x16 16x8x8 tile
#    that ties cuBLAS (session 10), never timed with it (build .cache/build_511m: `python3 tools/merge_builds.py
#    --out .cache/build_511m .cache/build_st .cache/build_all511`, the latter `composer build --arch sm_90 --paths
#    GEMM_FUSED --orders 511 --fused-variants all --out .cache/build_all511`).
# 2. p = 767: the overlap at 32 and 44 SMs (predictions 4da3142), GEMM_FUSED and GEMM with and without it.
# 3. `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3` on the shipped schedules (the
#    issue's figure).
# Carry: .whl .cache/commit .cache/build_s22 .cache/build_511m. KEEP="" tools/device_slim.sh on first.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ov $OUT/bench
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
ST="bm=128,bn=64,bk=16,warps_m=2,warps_n=2,stages=3,swap=false,stagger_us=50"
COMPOSER_BUILD_DIR=$PWD/.cache/build_511m timeout 150 python3 tools/variants_bench.py --order 511 --variant GEMM_FUSED \
  --variant "GEMM_FUSED:overlap_sms=44;carrier_tile=$ST" --variant GEMM_FUSED:overlap_sms=38 --variant GEMM_FUSED:overlap_sms=50 \
  --variant "GEMM_FUSED:carrier=z;fold=on" --variant GEMM_FUSED:carrier=z --variant GEMM_FUSED:carrier=x \
  --variant GEMM --variant GEMM_CUTE --variant GEMM_CUTE:overlap_sms=44 --rounds 3 --calls 3 \
  --out $OUT/ov/p511.json > $OUT/logs/ov511.log 2>&1
t ov511 $?
grep -E "us +x" $OUT/logs/ov511.log | cut -c1-170
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout 150 python3 tools/variants_bench.py --order 767 \
  --variant GEMM_FUSED:overlap_sms=0 --variant GEMM_FUSED:overlap_sms=32 --variant GEMM_FUSED:overlap_sms=44 \
  --variant GEMM --variant GEMM:overlap_sms=32 --rounds 3 --calls 2 --out $OUT/ov/p767.json > $OUT/logs/ov767.log 2>&1
t ov767 $?
grep -E "us +x" $OUT/logs/ov767.log | cut -c1-170
left=$(( 360 - $(elapsed) ))
[ $left -gt 60 ] && COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout $left python3 -m composer.cli.main bench \
  --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1
t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
finish_call ov bench
