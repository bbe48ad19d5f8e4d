#!/usr/bin/env bash
# Session 33 call 5 (H200 only; about 200 s; stops at once on another GPU): call 2's H200 branch at p = 7 alone, for the
# device time left after calls 1-4 (an H100): docs/data/h200_s32/calls/call5.sh with ORDERS=7 on this session's
# re-pinned plan. Carry: .whl .cache.
PLAN=docs/data/h200_s33/plans/sweep_plan_face_links_h100.json ORDERS=7 exec bash docs/data/h200_s32/calls/call5.sh
