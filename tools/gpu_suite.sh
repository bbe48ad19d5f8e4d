#!/usr/bin/env bash
# The whole GPU test suite (`pytest -m gpu`) in five parts that each fit one device call (at most 560 s each;
# measured on an H100 in session 40 where said, else estimates from earlier logs, +-40 %). Run on the device from the repository root with
# the wheels and the suite's build carried:
#
#   bash tools/gpu_suite.sh build          # here, once per tree: .cache/build_suite (about 7 min, 16 MB)
#   bash tools/gpu_suite.sh A|B|C|D|E      # on the device (carry .whl .cache/build_suite .cache/commit)
#
# A: runtime, scheduler, paths, green contexts, clusters, DMMA pipe, campaign, build, profile, machine
#    schedules, shape twins, the L2 probe, the flux overlap, CuTe and the carrier sweep (H100: 95 tests, 208 s);
# B: the fused paths' main suites (H100: 59 tests, 269 s); C: the other fused families (H100: 61 tests, 288 s);
# D: GEMM_FUSED's validations and its twin tests (about 360 s; p = 767 on two elements needs 124 GB: it skips
#    on an 80-GB GPU); E: the epilogue trees' NumPy emulation on the GPU (about 150 s; part of C until session
#    40, whose call cut it off after C's first 288 s).
# Each part writes $OUT/logs/gpu_suite_PART.log (verbose, with the 15 slowest tests).
set -o pipefail
part=${1:?usage: gpu_suite.sh build|A|B|C|D|E}
if [ "$part" = -h ] || [ "$part" = --help ]; then sed -n "2,/^set -o/p" "$0" | sed "s/^# \{0,1\}//; /^set -o/d"; exit 0; fi
case $part in build|A|B|C|D|E) ;; *) echo "gpu_suite.sh: unknown part $part (build, A, B, C, D or E; --help)" >&2; exit 2 ;; esac
B=.cache/build_suite
if [ "$part" = build ]; then
  export COMPOSER_SCHEDULE_MACHINE=generic  # the schedules the tests force (tests/conftest.py)
  M="python3 -m composer.cli.main"
  $M build --arch sm_90 --orders 7,15,31,63,127,255,511,575,767 --paths GEMM_CUTE,GEMM_FUSED --fused-variants all \
    --out $B && $M build --arch sm_90 --orders 511 --paths GEMM_FUSED --fused-variants tiles --out $B \
    && python3 tools/gemm_micro.py variants --out $B --only y:127 --fragment-pipeline both --async-epilogue 4
  exit $?
fi
: "${OUT:?run on the device: OUT is its output folder}"
mkdir -p "$OUT/logs"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > "$OUT/logs/pip.log" 2>&1
export PYTHONPATH=/tmp/site:$PWD COMPOSER_BUILD_DIR=$PWD/$B
[ -f .cache/commit ] && export COMPOSER_GIT_COMMIT=$(cat .cache/commit)
P="python3 -m pytest -v -m gpu -p no:cacheprovider --durations=15"
log="$OUT/logs/gpu_suite_$part.log"
case $part in
  A) timeout 560 $P tests/test_runtime_gpu.py tests/test_sched_gpu.py tests/test_paths_gpu.py tests/test_green_gpu.py \
       tests/test_cluster.py tests/test_dmma_pipe.py tests/test_campaign_gpu.py tests/test_build_fused.py \
       tests/test_profile_cpu.py tests/test_machine_schedules.py tests/test_shape_twin.py tests/test_l2_sides.py \
       tests/test_flux_overlap_gpu.py tests/test_cute_gpu.py tests/test_sweep_carrier.py tests/test_parity_gpu.py > "$log" 2>&1 ;;
  B) timeout 560 $P tests/test_fused_gpu.py tests/test_fused_xyz_cluster.py tests/test_fused_stream.py \
       tests/test_fused_copies.py > "$log" 2>&1 ;;
  C) timeout 400 $P tests/test_fused_carveout.py tests/test_fused_chunks.py tests/test_fused_descending.py \
       tests/test_fused_element_order.py tests/test_fused_face_links.py tests/test_fused_interior_maps.py \
       tests/test_fused_swizzle.py tests/test_fused_xchain.py tests/test_fused_xfaces.py tests/test_fused_side_queues.py \
       tests/test_fused_parity.py tests/test_fused_stream_parity.py \
       > "$log" 2>&1 ;;
  E) timeout 400 $P tests/test_gemm_fused_gpu.py -k numpy_emulation > "$log" 2>&1 ;;
  D) timeout 330 $P tests/test_gemm_fused_gpu.py -k validates > "$log" 2>&1
     # the twin tests on the kernels up to p = 255 and p = 511's carrier (at 575 and 767 one random operand set
     # is 9 arrays of 1.5-3.6 GB: 20 minutes of host time)
     python3 tools/filter_build.py $B /tmp/bd_twins '^dgemm_p0(007|015|031|063|127|255)_' '^dgemm_p0511_y_' \
       > /dev/null && COMPOSER_BUILD_DIR=/tmp/bd_twins timeout 200 $P tests/test_gemm_fused_gpu.py -k twins >> "$log" 2>&1 ;;
  *) echo "gpu_suite.sh: unknown part $part (build, A, B, C, D or E)" >&2; exit 2 ;;
esac
rc=$?
grep -E " (FAILED|ERROR)" "$log" | head -20
grep -cE " PASSED" "$log" | sed 's/^/passed: /'
tail -2 "$log"
exit $rc
