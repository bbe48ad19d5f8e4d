#!/usr/bin/env bash
# Session 33 call 3 (ran on the warm H100 right after call 2, as one command line; about 70 s): FUSED at p = 7 with the
# face links and without the compiler barrier (which now goes to the tensor-core engine only), A B B A against the
# H100's overlay; FUSED_TC beside it as a check (its overlay table now is its B table: expect a tie).
# Carry: .whl .cache (nvrtc_pin9 with this source's CUBINs, s32_links_h100).
source tools/device_prelude.sh; mkdir -p $OUT/ab; record_gpu; export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin9; ab_benches $PWD/.cache/s32_links_h100 FUSED,FUSED_TC 7 60; finish_call ab
