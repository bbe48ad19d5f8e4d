#!/usr/bin/env bash
# Session 39 call 2 (any GPU, meant for the H100 the device lends when no H200 starts; about 420 s):
# 1. the L2 partition probe (tools/l2_sides.py, new this session; the H100 has the H200's GH100 die and L2):
#    the SMs' sides, the lines' home interleave, own-side against other-side L2 read bandwidth; once more with a
#    16-MiB read buffer (a second home map, a second bandwidth set);
# 2. part A of the whole GPU suite (tools/gpu_suite.sh: runtime, scheduler, paths, green contexts, clusters, CuTe,
#    the flux overlap, the carrier sweep, the probe's own test; about 330 s).
# Carry: .whl .cache (build_suite from `bash tools/gpu_suite.sh build`, commit).
source tools/device_prelude.sh
call_start .cache/nvrtc_pin9 l2
timeout 100 python3 tools/l2_sides.py --out "$OUT/l2/sides.json" > "$OUT/logs/l2_sides.log" 2>&1; t l2_sides $?
cat "$OUT/logs/l2_sides.log"
timeout 100 python3 tools/l2_sides.py --read-mib 16 --out "$OUT/l2/sides16.json" > "$OUT/logs/l2_sides16.log" 2>&1
t l2_sides16 $?
cat "$OUT/logs/l2_sides16.log"
bash tools/gpu_suite.sh A; t gpu_suite_A $?
finish_call l2
