#!/usr/bin/env bash
# Session 13, device call 1 (issue 14): GEMM_FUSED with the flux formed in the stage (flux = "staged",
# GemmConfig.product_staged: each thread multiplies the q and velocity chunks it copied, once, in shared
# memory, before the barrier that publishes the stage; the kernels give up stages to keep the array
# kernels' blocks per SM). Build: .cache/build_s13 = `composer build --arch sm_90 --orders 7,127,511,575,767
# --paths GEMM_CUTE,GEMM_FUSED --fused-variants all`, filtered (tools/filter_build.py) to p = 511 and the
# flux-forming kernels of p = 7, the array y carrier and the y-carrier staged/mainloop kernels of p = 511
# and GEMM_CUTE's (.cache/build_s13dev; the 64 MiB carry limit).
#  1. bitwise twins: every staged kernel of p = 7 and the y carrier and plain GEMMs of 511 against the
#     kernel forming the same product at its fragment loads (tests/test_gemm_fused_gpu.py -k staged_product);
#  2. GEMM_FUSED against the NumPy reference on the point-varying input, small non-cubic grids, every
#     carrier/fold/flux variant built at p = 7 (mainloop and staged);
#  3. composer sweep-carrier --order 511 --only flux=staged (each candidate validated at the Table S29 grid,
#     then 5 interleaved rounds against the shipped array-flux y carrier);
#  4. composer bench GEMM, GEMM_CUTE, GEMM_FUSED (flux = staged) at p = 511, 3 interleaved rounds;
#  5. composer profile GEMM_FUSED (flux = staged) at p = 511 (ncu: per-kernel time, pipes, DRAM).
# Carry: .whl .cache/build_s13dev .cache/commit.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/gf
python3 tools/filter_build.py .cache/build_s13dev /tmp/build_twin 'p0007_.*_q[sv]_' \
  'p0511_[xz]_m16_8_8_q[sv]_' 'p0511_y_m16_8_8_carry_q[sv]_' 'nq8$' > $OUT/logs/filter.log 2>&1
COMPOSER_BUILD_DIR=/tmp/build_twin timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gemm_fused_gpu.py -k staged_product > $OUT/logs/twin_staged.log 2>&1; t twin_staged $?
COMPOSER_BUILD_DIR=/tmp/build_twin timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider \
  "tests/test_gemm_fused_gpu.py::test_gemm_fused_validates_at_every_order[7]" \
  > $OUT/logs/validate_small.log 2>&1; t validate_small $?
export COMPOSER_BUILD_DIR=$ROOT/.cache/build_s13dev
timeout 150 python3 -m composer.cli.main sweep-carrier --order 511 --only flux=staged \
  --schedules-dir $OUT/gf/sched511 --out $OUT/gf/staged511.json > $OUT/logs/staged511.log 2>&1; t staged511 $?
L=$(( 470 - $(elapsed) )); [ $L -gt 150 ] && L=150
if [ $L -ge 60 ]; then
  timeout $L python3 -m composer.cli.main bench --paths GEMM,GEMM_CUTE,GEMM_FUSED --orders 511 --rounds 3 \
    --option GEMM_FUSED.flux=staged --out $OUT/gf/bench511 > $OUT/logs/bench511.log 2>&1; t bench511 $?
fi
L=$(( 570 - $(elapsed) ))
if [ $L -ge 45 ]; then
  timeout $L python3 -m composer.cli.main profile --paths GEMM_FUSED --orders 511 --option GEMM_FUSED.flux=staged \
    --out $OUT/gf/prof511 > $OUT/logs/prof511.log 2>&1; t prof511 $?
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs gf 2>/dev/null
rm -rf $OUT/gf
cat $OUT/logs/times.txt; tail -3 $OUT/logs/twin_staged.log $OUT/logs/validate_small.log
grep -hE 'winner|wrote|fastest' $OUT/logs/staged511.log | head; tail -12 $OUT/logs/bench511.log; tail -25 $OUT/logs/prof511.log
