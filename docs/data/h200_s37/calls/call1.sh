#!/usr/bin/env bash
# Session 37 call 1 (never ran: every H200 start of sessions 37 and 38 was refused). Superseded by
# docs/data/h200_s38/calls/call1.sh, which runs its items (the pair-bricks / face-links plan
# docs/data/h200_s37/plans/sweep_plan_pair_bricks.json at p = 7 and 15 applied at 1 % with A B B A beside GEMM,
# FUSED_DFMA's bench at p = 7 and 15, p = 767's `composer bench` of GEMM and GEMM_FUSED, ncu of what was applied),
# now stage-timed, plus session 38's descending plan at p = 31 and 127. Carry: .whl .cache.
exec bash "$(dirname "$0")/../../h200_s38/calls/call1.sh" "$@"
