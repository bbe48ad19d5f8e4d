#!/usr/bin/env bash
# Session 11 plan, device call 2: GEMM_FUSED's asynchronous-epilogue carrier (built in session 10, never
# run). First the twin tests (a hang is a barrier bug: the timeouts stop it): the plain x GEMMs with the
# switch against their twins at Nq = 8, 24, 136 (.cache/build_fpx), then the carriers against theirs at
# Nq = 512 and 576 (.cache/build_gf); only if both pass, the carrier sweep at 511, 575 and (time left) 767 of the .ae
# candidates against the shipped carrier (each validated, interleaved rounds).
# Carry: .whl .cache/build_gf (or, over the 64 MiB limit, GF=$PWD/.cache/build_gf_hi: its p = 511, 575, 767 entries) .cache/build_fpx .cache/commit.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/gf
COMPOSER_BUILD_DIR=$ROOT/.cache/build_fpx timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_cute_gpu.py -k switch > $OUT/logs/switch_test.log 2>&1; S1=$?; t switch_test $S1
S2=1
if [ $S1 -eq 0 ]; then
  COMPOSER_BUILD_DIR=${GF:-$ROOT/.cache/build_gf} timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider \
    tests/test_gemm_fused_gpu.py -k async_epilogue > $OUT/logs/ae_test.log 2>&1; S2=$?; t ae_test $S2
fi
if [ $S2 -eq 0 ]; then
  for p in 511 575 767; do
    L=$(( 560 - $(elapsed) )); [ $L -lt 60 ] && break; [ $L -gt 120 ] && L=120
    COMPOSER_BUILD_DIR=${GF:-$ROOT/.cache/build_gf} timeout $L python3 -m composer.cli.main sweep-carrier --order $p --tiles \
      --async-epilogue --only .ae --schedules-dir $OUT/gf/sched$p --out $OUT/gf/ae$p.json > $OUT/logs/ae$p.log 2>&1
    t "ae$p" $?
  done
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs gf 2>/dev/null
rm -rf $OUT/gf
cat $OUT/logs/times.txt; tail -3 $OUT/logs/switch_test.log $OUT/logs/ae_test.log 2>/dev/null; grep -hE '"winner"|wrote' $OUT/logs/ae*.log
