#!/usr/bin/env bash
# Session 39 call 2 (any GPU, meant for the H100 the device lends when no H200 starts; about 480 s):
# 1. the L2 partition probe (tools/l2_sides.py, new this session; the H100 has the H200's GH100 die and L2):
#    the SMs' sides, the lines' home interleave, own-side against other-side L2 read bandwidth;
#    and once more with a 16-MiB read buffer (a second home map, a second bandwidth set);
# 2. the GPU suites that need no `composer build` directory, on the tree as it is (none has run whole since
#    session 5): runtime, paths, scheduler, green contexts, clusters, the probe, every fused family. Verbose log
#    with the 40 slowest tests, so the rest of the suite can be cut into calls.
# Carry: .whl .cache (nvrtc_pin9: the 13.5 kernels the shipped tables name, commit).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 l2
timeout 120 python3 tools/l2_sides.py --out "$OUT/l2/sides.json" > "$OUT/logs/l2_sides.log" 2>&1; t l2_sides $?
cat "$OUT/logs/l2_sides.log"
timeout 120 python3 tools/l2_sides.py --read-mib 16 --out "$OUT/l2/sides16.json" > "$OUT/logs/l2_sides16.log" 2>&1
t l2_sides16 $?
cat "$OUT/logs/l2_sides16.log"
timeout 380 python3 -m pytest -v -m gpu -p no:cacheprovider --durations=40 \
  tests/test_l2_sides.py tests/test_runtime_gpu.py tests/test_cluster.py tests/test_green_gpu.py \
  tests/test_sched_gpu.py tests/test_paths_gpu.py tests/test_fused_gpu.py tests/test_fused_stream.py \
  tests/test_fused_xfaces.py tests/test_fused_face_links.py tests/test_fused_interior_maps.py \
  tests/test_fused_element_order.py tests/test_fused_descending.py tests/test_fused_copies.py \
  tests/test_fused_swizzle.py tests/test_fused_carveout.py tests/test_fused_xchain.py \
  tests/test_fused_xyz_cluster.py tests/test_fused_chunks.py > "$OUT/logs/pytest_gpu.log" 2>&1; t pytest_gpu $?
grep -cE " PASSED| FAILED| ERROR| SKIPPED" "$OUT/logs/pytest_gpu.log"
grep -E " FAILED| ERROR" "$OUT/logs/pytest_gpu.log" | head -20
tail -3 "$OUT/logs/pytest_gpu.log"
finish_call l2
