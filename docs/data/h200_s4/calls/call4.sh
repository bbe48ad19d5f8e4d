#!/usr/bin/env bash
# Session 4, device call D: GEMM_CUTE / GEMM with the current kernels: the shipped assignment
# (16x8x4) at p >= 127, then all-CuTe with 16x8x4 and with 8x8x4.
set -o pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_GIT_COMMIT=$(cat .cache/commit) COMPOSER_BUILD_DIR=$PWD/build/sm_90
mkdir -p $OUT/logs
t() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> $OUT/logs/times.txt; }
timeout 150 python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE --orders 127,255,511,575 --rounds 3 --out $OUT/shipped > $OUT/logs/shipped.log 2>&1; t shipped $?
timeout 110 python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE --orders 127,255,511 --rounds 2 --option GEMM_CUTE.library=cute \
  --out $OUT/allcute16 > $OUT/logs/allcute16.log 2>&1; t allcute16 $?
LEFT=$(( 430 - ($(date +%s) - T0) ))
timeout $LEFT python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE --orders 7,15,31,63,127,255,511 --rounds 2 \
  --option GEMM_CUTE.library=cute --option GEMM_CUTE.mma=8x8x4 --out $OUT/allcute8 > $OUT/logs/allcute8.log 2>&1; t allcute8 $?
tar -C $OUT -czf $OUT/results.tgz logs shipped allcute16 allcute8 2>/dev/null
cat $OUT/logs/times.txt; for d in shipped allcute16 allcute8; do echo "== $d"; grep "^| GEMM" $OUT/$d/summary.md | cut -c1-150; done
