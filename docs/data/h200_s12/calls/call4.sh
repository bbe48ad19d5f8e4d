#!/usr/bin/env bash
# Session 12, device call 4: GEMM_FUSED's carriers for more blocks per SM (issue 14). The shipped p = 511
# carrier (128x64x16, 3 stages, 255 registers) holds two blocks per SM and runs mainloop then epilogue
# in each; session 11's asynchronous carriers held one block (two hand-over buffers: 128-200 KB), four MMA
# warps, and lost. Candidates (.cache/build_s12gf, composer build --fused-variants tiles, filtered to them,
# their plain twin and the shipped carriers): the 64x64x16 tile compiled for three blocks per SM at 4 and 3
# stages (mb3: 168 registers, 8 B spills), and the asynchronous carrier with one buffer for two blocks per
# SM (ae4b1mb2, ae8b1mb2: 96 KB, 128 registers, 192 B spills). First the sweeps (each candidate validated
# against the NumPy reference, then interleaved rounds against the shipped carrier), then the bitwise twin
# test of every new carrier (a hang is a barrier bug: the timeout stops it).
# Carry: .whl .cache/build_s12gf .cache/commit.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
export COMPOSER_BUILD_DIR=$ROOT/.cache/build_s12gf
mkdir -p $OUT/gf
for p in 511 575; do
  L=$(( 400 - $(elapsed) )); [ $L -lt 60 ] && break; [ $L -gt 150 ] && L=150
  timeout $L python3 -m composer.cli.main sweep-carrier --order $p --tiles --async-epilogue --only mb \
    --schedules-dir $OUT/gf/sched$p --out $OUT/gf/mb$p.json > $OUT/logs/mb$p.log 2>&1
  t "mb$p" $?
done
L=$(( 575 - $(elapsed) ))
if [ $L -ge 60 ]; then
  timeout $L python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gemm_fused_gpu.py -k async_epilogue \
    > $OUT/logs/twin_test.log 2>&1; t twin_test $?
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs gf 2>/dev/null
rm -rf $OUT/gf
cat $OUT/logs/times.txt; tail -3 $OUT/logs/twin_test.log 2>/dev/null; grep -hE 'winner|fastest|wrote' $OUT/logs/mb*.log || true
