#!/usr/bin/env bash
# Session 40 call 2 (any GPU; about 480 s): what call 1 and the GPU suite's parts A and B (docs/data/h100_s40) left:
# 1. the trace-cluster GPU tests again, on their new base (`trace_cluster_form`: part B's four failures were the tests
#    building tables the current keys refuse, interior/exterior maps off with traces from tiles);
# 2. the L2 probe with its raw first loads (tools/l2_sides.py `reference_raw`): on the H100 the reference design
#    found one side (a small group of SMs apart from the rest), so call 1's probed map was one queue;
# 3. the GPU suite's part C (schedule keys: carveout, chunks, descending, element order, face links, maps, swizzle,
#    x chains, x faces; GEMM_FUSED's NumPy emulation), then part D as far as LIMIT allows.
# Carry: .whl .cache (build_suite, commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-560}
mkdir -p "$OUT/l2"
P="python3 -m pytest -v -m gpu -p no:cacheprovider"
timeout 150 $P tests/test_fused_gpu.py -k "trace" > "$OUT/logs/trace_clusters.log" 2>&1; t trace_clusters $?
tail -3 "$OUT/logs/trace_clusters.log"
timeout 90 python3 tools/l2_sides.py --out "$OUT/l2/sides.json" > "$OUT/logs/l2_sides.log" 2>&1; t l2_sides $?
head -3 "$OUT/logs/l2_sides.log"
bash tools/gpu_suite.sh C; t suite_C $?
tail -2 "$OUT/logs/gpu_suite_C.log"
if [ $(( LIMIT - $(elapsed) )) -gt 200 ]; then
  timeout $(( LIMIT - $(elapsed) )) bash tools/gpu_suite.sh D; t suite_D $?
  tail -2 "$OUT/logs/gpu_suite_D.log"
fi
finish_call l2
