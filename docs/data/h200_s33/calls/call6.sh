#!/usr/bin/env bash
# Session 33 call 6 (any GPU, about 25 s; ran on an H100 lent to call 1's last start, as one command line): the GPU tests
# of tests/test_fused_face_links.py on this tree's sources (FUSED's linked tables without the compiler barrier, the
# tensor-core ones with it). Carry: .whl .cache (nvrtc_pin9).
source tools/device_prelude.sh; record_gpu; export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin9; timeout 120 python3 -m pytest -q -m gpu tests/test_fused_face_links.py -rs > $OUT/logs/gpu_tests.log 2>&1; t gpu_tests $?; tail -3 $OUT/logs/gpu_tests.log; finish_call
