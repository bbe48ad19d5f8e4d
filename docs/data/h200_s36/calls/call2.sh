#!/usr/bin/env bash
# Session 36 call 2 (H200 only, about 300 s; stops at once on another GPU): what call 1 left open.
# 1. FUSED_DFMA at p = 7 and 15 on the tables applied in session 36 (it runs FUSED_TC's tables, `schedule_of`), beside
#    FUSED_TC: `composer bench --paths FUSED_TC,FUSED_DFMA --orders 7,15 --rounds 3`.
# 2. Issue 14 at p = 767 with the overlap on 32 SMs now shipped: `composer bench --paths GEMM,GEMM_FUSED --orders 767
#    --rounds 2` (session 30 ran it on an H100: 0.948 x GEMM).
# Carry: .whl .cache (nvrtc_pin9 filled for the shipped p = 7 and 15 tables, build_s22, commit).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 bench
h200_only
timeout 120 $M bench --paths FUSED_TC,FUSED_DFMA --orders 7,15 --rounds 3 --out "$OUT/bench/dfma" \
  > "$OUT/logs/bench_dfma.log" 2>&1; t bench_dfma $?
grep -E "^\| FUSED" "$OUT/logs/bench_dfma.log" | cut -d'|' -f2,3,6,10
COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout 300 $M bench --paths GEMM,GEMM_FUSED --orders 767 --rounds 2 \
  --out "$OUT/bench/p767" > "$OUT/logs/bench_767.log" 2>&1; t bench_767 $?
grep -E "^\| GEMM" "$OUT/logs/bench_767.log" | cut -d'|' -f2,3,6,10
finish_call bench
