#!/usr/bin/env bash
# Session 10, device call 5: issue 14 item 7 in one interleaved run: the x GEMM at Nq = 512 (M = K = 512,
# N = 262144) on cuBLAS and on the CuTe kernels call 4 found fastest (16x8x8 on cuBLAS's 128x64x16 2x2
# 3-stage tile, v15; its 64x128x16 twin, v14; the shipped 128x128x32 16x8x4 tile, v01; 16x8x4 on the
# 128x64x16 2x2 tile, v07; the best fragment-pipeline kernel, v04fp), 8 rounds with the order rotated,
# every output against cuBLAS's, the SM clock sampled during each timing (docs/data/h200_s10/call5a). Then,
# on the same warm machine, the same with --rounds 30 --match v15_0,v07_0,v04fp_0 (docs/data/h200_s10/call5;
# the device command was `sed -i 's/--rounds 8 --match v15_0,v14_0,v01_0,v07_0,v04fp_0/--rounds 30 --match
# v15_0,v07_0,v04fp_0/' docs/data/h200_s10/calls/call5.sh && bash docs/data/h200_s10/calls/call5.sh`).
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/micro
timeout 200 python3 tools/gemm_micro.py run --build .cache/build_fpx --sections "interleaved x p511" --budget 190 \
  --rounds 8 --match v15_0,v14_0,v01_0,v07_0,v04fp_0 --out $OUT/micro > $OUT/logs/micro_interleaved.log 2>&1; t micro $?
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs micro 2>/dev/null
rm -rf $OUT/micro
cat $OUT/logs/times.txt; grep -E "interleaved|ERROR|Error" $OUT/logs/micro_interleaved.log | cut -c1-200 | tail -12
