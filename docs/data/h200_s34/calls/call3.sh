#!/usr/bin/env bash
# Session 34 call 3 (H200 only; about 200 s): issue 16 at p = 7, docs/data/h200_s33/calls/call5.sh (the face-links
# plan swept against the generic tables, now applied at 1 %: session 34 call 2 passed 1 to a fraction and applied
# nothing; A B B A with GEMM, FUSED, FUSED_TC, FUSED_TC16; ncu of the applied tables). Carry: .whl .cache.
exec bash docs/data/h200_s33/calls/call5.sh
