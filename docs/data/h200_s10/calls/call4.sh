#!/usr/bin/env bash
# Session 10, device call 4: the fragment pipeline (GemmConfig.fragment_pipeline: the next k-tile's first
# fragments loaded before the last k-step's MMAs, the wait and barrier moved there; CUTLASS's multistage
# register double buffer) measured where the CuTe mainloop trails cuBLAS: (a) every x GEMM variant at
# Nq = 512 with and without it, side by side with cuBLAS (tools/gemm_micro.py, each output compared with
# cuBLAS's), and each pipelined kernel's output against its plain twin bit for bit; (b) GEMM_FUSED's
# carrier at p = 511 and 575 with it (sweep-carrier --only .fp, each validated, interleaved rounds).
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/micro $OUT/gf
COMPOSER_BUILD_DIR=$ROOT/.cache/build_fpx timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_cute_gpu.py \
  -k fragment_pipeline > $OUT/logs/fp_bitwise.log 2>&1; t fp_bitwise $?
timeout 200 python3 tools/gemm_micro.py run --build .cache/build_fpx --sections "bench x p511" --budget 180 \
  --out $OUT/micro > $OUT/logs/micro.log 2>&1; t micro $?
GF() {  # GF TIMEOUT ORDER [OPTIONS...]
  local to=$1 p=$2; shift 2
  COMPOSER_BUILD_DIR=$ROOT/.cache/build_gf timeout $to python3 -m composer.cli.main sweep-carrier --order $p --tiles \
    "$@" --schedules-dir $OUT/gf/sched --out $OUT/gf/fp$p.json > $OUT/logs/fp$p.log 2>&1; t "fp$p" $?
}
L=$(( 480 - $(elapsed) )); [ $L -gt 110 ] && L=110; [ $L -gt 40 ] && GF $L 511 --only .fp
L=$(( 530 - $(elapsed) )); [ $L -gt 110 ] && L=110; [ $L -gt 50 ] && GF $L 575 --only .fp
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs micro gf 2>/dev/null
rm -rf $OUT/micro $OUT/gf
cat $OUT/logs/times.txt; tail -3 $OUT/logs/fp_bitwise.log; grep -E "time x" $OUT/logs/micro.log | cut -c1-170 | tail -45; grep -hE '"winner"' $OUT/logs/fp*.log
