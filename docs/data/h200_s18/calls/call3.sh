#!/usr/bin/env bash
# Session 18, device call 3: call 2's large-order step timed out (80 s per bench of 511 and 767). Here FUSED_TC16
# at p = 511 only, B A B (B: the NVRTC 13.5 build .cache/build_n135, A: NVRTC 13.0 on the device), one validated
# round per invocation. Carry: .whl .cache/commit .cache/build_n135.
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ab
i=0
for X in B A B A; do
  [ $(elapsed) -lt 200 ] || break
  if [ $X = B ]; then export COMPOSER_BUILD_DIR=$PWD/.cache/build_n135; else unset COMPOSER_BUILD_DIR; fi
  timeout 70 python3 -m composer.cli.main bench --paths FUSED_TC16 --orders 511 --rounds 1 \
    --out $OUT/ab/p511_${X}$i > $OUT/logs/p511_${X}$i.log 2>&1
  t p511_${X}$i $?; i=$((i+1))
done
tar -C $OUT -czf $OUT/results.tgz logs ab 2>/dev/null
rm -rf $OUT/ab
cat $OUT/logs/times.txt
for f in $OUT/logs/p511_*.log; do echo "== $f"; grep -E "^\| (GEMM|FUSED)" $f | cut -d'|' -f2,3,6; done
