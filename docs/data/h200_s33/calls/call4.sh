#!/usr/bin/env bash
# Session 33 call 4 (ran on the warm H100 right after call 3, as one command line; about 25 s): ncu of FUSED at p = 7,
# A the H100's overlay table (vmapP), B the same with the face links (no barrier): why B runs x1.03.
# Carry: .whl .cache.
source tools/device_prelude.sh; mkdir -p $OUT/prof; record_gpu; export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin9; M="python3 -m composer.cli.main"; timeout 60 $M profile --paths FUSED --orders 7 --out $OUT/prof/A > $OUT/logs/prof_A.log 2>&1; t prof_A $?; COMPOSER_SCHEDULES=$PWD/.cache/s32_links_h100 timeout 60 $M profile --paths FUSED --orders 7 --out $OUT/prof/B > $OUT/logs/prof_B.log 2>&1; t prof_B $?; grep -h "fused_p7" $OUT/logs/prof_A.log $OUT/logs/prof_B.log; finish_call prof
