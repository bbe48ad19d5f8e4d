#!/usr/bin/env bash
# Session 28 call 14 (prepared, not run: the budget ended; about 150 s, any GPU): the p = 31 xyz kernel over a cluster
# of 4 at 1024 threads (one 224-KB block per SM with 32 warps at 64 registers, no spills; 512 threads ran 843-877 us
# against the shipped 616-637 on an H100 in call 4, 256 threads 940-970). `composer sweep-fused run` of
# docs/data/h200_s28/plans/sweep_plan_xyz31_t1024.json (cubins: `COMPOSER_CACHE_DIR=.cache/nvrtc_pin5 composer
# sweep-fused check --orders 31 --subset xyz_cluster --only "t(512|1024) " --pin-nvrtc --plan ...`), winners at 1 %.
# Carry: .whl .cache/commit .cache/nvrtc_pin5. KEEP="docs/data/h200_s28" tools/device_slim.sh on.
set -o pipefail
source tools/device_prelude.sh
record_gpu
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin5
sweep_apply docs/data/h200_s28/plans/sweep_plan_xyz31_t1024.json 31 100 0.01
finish_call sw sched
