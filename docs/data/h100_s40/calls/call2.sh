#!/usr/bin/env bash
# Session 40 call 2 (any GPU; about 560 s): what call 1 and the GPU suite's parts A and B (docs/data/h100_s40) left:
# 1. the trace-cluster GPU tests again, on their new base (`trace_cluster_form`: part B's four failures were the tests
#    building tables the current keys refuse, interior/exterior maps off with traces from tiles);
# 2. the L2 probe with its raw first loads (tools/l2_sides.py `reference_raw`): on the H100 the reference design
#    found one side (a small group of SMs apart from the rest), so call 1's probed map was one queue;
# 3. side queues at p = 7 with a measured split: A P P A benches of FUSED_TC and FUSED_TC16 (2 rounds; A the tables,
#    P docs/data/h200_s39/sched_sideq with `sm_sides=probe`, which now falls back to the matrix form where the
#    reference design finds one side), ncu of P (tools/l2_link.py: did the far hits fall?);
# 4. the GPU suite's part C (schedule keys: carveout, chunks, descending, element order, face links, maps, swizzle,
#    x chains, x faces; GEMM_FUSED's NumPy emulation), then part D as far as LIMIT allows.
# Carry: .whl .cache (nvrtc_pin9 with the queued p = 7 kernels, build_suite, commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-560}
call_start .cache/nvrtc_pin9 l2 sq prof
P="python3 -m pytest -v -m gpu -p no:cacheprovider"
timeout 150 $P tests/test_fused_gpu.py -k "trace" > "$OUT/logs/trace_clusters.log" 2>&1; t trace_clusters $?
tail -3 "$OUT/logs/trace_clusters.log"
timeout 90 python3 tools/l2_sides.py --out "$OUT/l2/sides.json" > "$OUT/logs/l2_sides.log" 2>&1; t l2_sides $?
head -3 "$OUT/logs/l2_sides.log"
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
S=$PWD/docs/data/h200_s39/sched_sideq
for run in A1 P1 P2 A2; do
  if [[ $run == P* ]]; then export COMPOSER_SCHEDULES=$S; else unset COMPOSER_SCHEDULES; fi
  timeout 70 python3 -m composer.cli.main bench --paths FUSED_TC,FUSED_TC16 --orders 7 --rounds 2 --out "$OUT/sq/$run" \
    > "$OUT/logs/sq_$run.log" 2>&1; t "sq_$run" $?
done
unset COMPOSER_SCHEDULES
python3 tools/compare_benches.py --a "$OUT/sq/A1" "$OUT/sq/A2" --b "$OUT/sq/P1" "$OUT/sq/P2" > "$OUT/logs/sq_AP.log" 2>&1
cat "$OUT/logs/sq_AP.log"; grep -ho '"side_queues":{[^}]*}' "$OUT"/sq/P1/runs.jsonl | sort | uniq -c
COMPOSER_SCHEDULES=$S timeout 60 python3 -m composer.cli.main profile --paths FUSED_TC,FUSED_TC16 --orders 7 \
  --out "$OUT/prof/sq" > "$OUT/logs/prof_sq.log" 2>&1; t prof_sq $?
unset COMPOSER_SCHEDULE_MACHINE COMPOSER_CACHE_DIR
timeout $(( LIMIT - $(elapsed) )) bash tools/gpu_suite.sh C; t suite_C $?
tail -2 "$OUT/logs/gpu_suite_C.log"
if [ $(( LIMIT - $(elapsed) )) -gt 200 ]; then
  timeout $(( LIMIT - $(elapsed) )) bash tools/gpu_suite.sh D; t suite_D $?
  tail -2 "$OUT/logs/gpu_suite_D.log"
fi
finish_call l2 sq prof
