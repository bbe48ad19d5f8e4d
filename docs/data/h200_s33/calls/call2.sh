#!/usr/bin/env bash
# Session 33 call 2 (H200 only, right after call 1 on the warm machine; about 500 s): docs/data/h200_s32/calls/call5.sh,
# issue 16 at p = 7 and 15 (the H100's findings of sessions 28-32 swept against the generic tables, applied at 1 %,
# A B B A benches with GEMM, ncu). Carry: .whl .cache.
exec bash docs/data/h200_s32/calls/call5.sh
