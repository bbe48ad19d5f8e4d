#!/usr/bin/env bash
# Session 13, device call 3 (issue 14): the staged flux after call 1. Call 1's ncu of GEMM_FUSED with
# flux = "staged" at p = 511 had the z GEMM DRAM bound (4506 us, 4.05 TB/s: the blocks that share a q/w
# panel ran 2048 blocks apart, so each of the 8 re-reads came from DRAM); its kernels now run their blocks
# along n first (GemmConfig.n_fastest, set for the staged kernels whose n tiles are fewer). Build
# .cache/build_s13 (`composer build --arch sm_90 --orders 7,63,127,511 --paths GEMM_CUTE,GEMM_FUSED
# --fused-variants all`), filtered to p = 511's y carrier, GEMM_CUTE's and the flux-forming kernels, and the
# flux-forming kernels of p = 7, 63, 127 (.cache/build_s13dev).
#  1. bitwise twins (staged against fragment-product kernels) at p = 7 and 511;
#  2. GEMM_FUSED against the NumPy reference (point-varying input, small non-cubic grids) at p = 63 and
#     127 for every mainloop and staged variant;
#  3. composer sweep-carrier --only flux=staged at p = 511; with --only flux=mainloop too at p = 127, 63
#     (each candidate validated at the Table S29 grid, then 5 interleaved rounds);
#  4. composer profile GEMM_FUSED (flux = staged) at p = 511.
# Carry: .whl .cache/build_s13dev .cache/commit.
set -o pipefail
source tools/device_prelude.sh
ROOT=$PWD
mkdir -p $OUT/gf
python3 tools/filter_build.py .cache/build_s13dev /tmp/build_twin 'p0007_.*_q[sv]_' \
  'p0511_[xz]_m16_8_8_q[sv]_' 'p0511_y_m16_8_8_carry_q[sv]_' 'nq8$' > $OUT/logs/filter.log 2>&1
COMPOSER_BUILD_DIR=/tmp/build_twin timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gemm_fused_gpu.py -k staged_product > $OUT/logs/twin_staged.log 2>&1; t twin_staged $?
export COMPOSER_BUILD_DIR=$ROOT/.cache/build_s13dev
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider \
  "tests/test_gemm_fused_gpu.py::test_gemm_fused_validates_at_every_order[63]" \
  "tests/test_gemm_fused_gpu.py::test_gemm_fused_validates_at_every_order[127]" \
  > $OUT/logs/validate_small.log 2>&1; t validate_small $?
timeout 120 python3 -m composer.cli.main sweep-carrier --order 511 --only flux=staged \
  --schedules-dir $OUT/gf/sched --out $OUT/gf/staged511.json > $OUT/logs/staged511.log 2>&1; t staged511 $?
for p in 127 63; do
  L=$(( 480 - $(elapsed) )); [ $L -lt 45 ] && break; [ $L -gt 150 ] && L=150
  timeout $L python3 -m composer.cli.main sweep-carrier --order $p --only flux=staged --only flux=mainloop \
    --schedules-dir $OUT/gf/sched --out $OUT/gf/staged$p.json > $OUT/logs/staged$p.log 2>&1; t staged$p $?
done
L=$(( 560 - $(elapsed) ))
if [ $L -ge 40 ]; then
  timeout $L python3 -m composer.cli.main profile --paths GEMM_FUSED --orders 511 --option GEMM_FUSED.flux=staged \
    --out $OUT/gf/prof511 > $OUT/logs/prof511.log 2>&1; t prof511 $?
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs gf 2>/dev/null
rm -rf $OUT/gf
cat $OUT/logs/times.txt; tail -2 $OUT/logs/twin_staged.log $OUT/logs/validate_small.log
grep -hE 'winner|wrote' $OUT/logs/staged*.log | head; tail -12 $OUT/logs/prof511.log
