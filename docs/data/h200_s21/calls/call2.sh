#!/usr/bin/env bash
# Session 21, device call 2 (issue 16, p = 7-63): call 1's families again, with the x faces formed in the staging
# loop (`traces = "xfaces"`, second form; call 1 measured a shared buffer read after the staging barrier: slower),
# the budget family's caps on early weights (`weights = "early"`; call 1 measured the min_blocks rule's late weight
# loads at +24 % on the same registers) and the new family `x_pairs` (two x-neighbour elements per block, the face
# they share exchanged in shared memory). Plan: `COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin2 composer sweep-fused check
# --orders 7,15,31,63 --subset xfaces,budget,x_pairs --pin-nvrtc --max-spill 16 --plan
# docs/data/h200_s21/plans/sweep_plan_budget2.json` (163 rows, each validated on the Table S29 grid, then timed
# interleaved with the shipped tables), applied at --min-gain 0.01; then `composer bench` of GEMM and the fused paths
# at those orders (3 rounds), the GPU tests of the new keys (small non-cubic and S29 grids, odd x extents refused) and
# of the tables then in use, the DMMA latency loops (tools/dmma_pipe.py, issue 15), ncu of FUSED_TC p = 7 on xfaces,
# and of the applied tables at p = 7, 15 if any.
# Carry: .whl .cache/commit .cache/nvrtc_pin2 .cache/xf_sched (the schedules with FUSED_TC p = 7 on xfaces:
# `python3 tools/candidate_schedules.py --order 7 --variant FUSED_TC --subset xfaces --only 'Mxfaces pio$' --pin-nvrtc
# --out .cache/xf_sched`; its CUBIN is in the plan's cache).
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin2
mkdir -p $OUT/bench $OUT/prof
sweep_apply docs/data/h200_s21/plans/sweep_plan_budget2.json 7,15,31,63 240 0.01
timeout 170 python3 -m composer.cli.main bench --paths GEMM,FUSED,FUSED_TC,FUSED_TC16 --orders 7,15,31,63 --rounds 3 \
  --out $OUT/bench/b > $OUT/logs/bench.log 2>&1; t bench $?
timeout 200 python3 -m pytest -q -m gpu tests/test_fused_xfaces.py > $OUT/logs/gpu_xfaces.log 2>&1; t gpu_xfaces $?
tail -3 $OUT/logs/gpu_xfaces.log
timeout 100 python3 -m pytest -q -m gpu tests/test_fused_gpu.py -k "test_fused_paths_match_reference and (7- or 15- or 31- or 63-)" \
  > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?
tail -3 $OUT/logs/gpu_tests.log
# issue 15: each DMMA shape's latency and issue interval (register-only loops, one block per SM), for the
# shape transfer's warp loss (the 16-row twins at one block per SM, session 20); and its GPU test
timeout 90 python3 tools/dmma_pipe.py --out $OUT/logs/dmma_pipe.json > $OUT/logs/dmma_pipe.log 2>&1; t dmma_pipe $?
timeout 60 python3 -m pytest -q -m gpu tests/test_dmma_pipe.py > $OUT/logs/gpu_dmma_pipe.log 2>&1; t gpu_dmma_pipe $?
left=$(( 560 - $(elapsed) ))
[ $left -gt 30 ] && COMPOSER_SCHEDULES=$PWD/.cache/xf_sched timeout $left python3 -m composer.cli.main profile \
  --paths FUSED_TC --orders 7 --out $OUT/prof/xf7 > $OUT/logs/prof.log 2>&1; t prof_xf $?
left=$(( 570 - $(elapsed) ))
[ $left -gt 40 ] && [ -n "$COMPOSER_SCHEDULES" ] && timeout $left python3 -m composer.cli.main profile \
  --paths FUSED,FUSED_TC,FUSED_TC16 --orders 7,15 --out $OUT/prof/applied >> $OUT/logs/prof.log 2>&1; t prof_applied $?
for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
finish_call sw sched bench prof
grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench.log | cut -d'|' -f2,3,6,10,11
grep -hE "│ fused" $OUT/logs/prof.log | cut -c1-200
