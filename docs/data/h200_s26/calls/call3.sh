#!/usr/bin/env bash
# Session 26, device call 3 (about 250 s), for an H200 (call 2 landed on an H100): issue 14's figure on the H200.
# 1. `composer bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3` on the shipped schedules (the
#    overlap applied in call 1); the H100 ran GEMM_FUSED's sustained step loop at a 5 % lower SM clock than GEMM's
#    (power cap), so the bench figure can differ from the variants run's.
# 2. p = 767: GEMM_FUSED unsplit and overlapped on 32 SMs (the H100's best, the prediction's) against GEMM.
# Carry: .whl .cache/commit .cache/build_s22. KEEP="" tools/device_slim.sh on first.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ov $OUT/bench
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" != *H200* ]]; then echo "not an H200 ($GPU): stopping (the H100 ran this in call 2)"; exit 3; fi
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout 170 python3 -m composer.cli.main bench \
  --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511,575 --rounds 3 --out $OUT/bench/b > $OUT/logs/bench.log 2>&1
t bench $?
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
left=$(( 300 - $(elapsed) ))
[ $left -gt 60 ] && COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout $left python3 tools/variants_bench.py --order 767 \
  --variant GEMM_FUSED:overlap_sms=0 --variant GEMM_FUSED:overlap_sms=32 --variant GEMM --rounds 3 --calls 2 \
  --out $OUT/ov/p767.json > $OUT/logs/ov767.log 2>&1
t ov767 $?
grep -E "us +x" $OUT/logs/ov767.log | cut -c1-120
finish_call ov bench
