#!/usr/bin/env bash
# Session 25, device call 1; the GPU's name picks the work.
# On an H200 (issue 14, GEMM_FUSED <= 0.90 x GEMM at p = 511, 575, 767): the volume flux overlapped with the first
# GEMM (`overlap_sms`) at the three target orders, each variant validated and timed interleaved on one resident
# problem with GEMM (tools/variants_bench.py); p = 511 scores the predictions committed in 6a8b77d
# (docs/data/h200_s22/predictions); 575 and 767 were never run with the overlap. Then `composer graph --measure` of
# the overlap plan. Build: .cache/build_s22 (`composer build --arch sm_90 --paths GEMM_FUSED --orders
# 15,255,511,575,767 --out .cache/build_s22`).
# On another GPU (an H100: the H200 numbers of issue 16 cannot come from it, its relative ones can): session 21's
# issue-16 sweep (xfaces / x_pairs / budget with early weights, p = 7-63, each row validated, timed interleaved with
# the shipped tables; plan docs/data/h200_s21/plans/sweep_plan_budget2.json, cache .cache/nvrtc_pin2 for the
# device's NVRTC 13.0), then ncu of FUSED_TC at p = 7 shipped and on xfaces (does the L2's 96 % fall?).
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin2 .cache/xf_sched
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/ov $OUT/graph $OUT/prof
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then
  export COMPOSER_BUILD_DIR=$PWD/.cache/build_s22
  ov() {  # ov ORDER TIMEOUT ROUNDS CALLS VARIANT...
    local p=$1 to=$2 r=$3 c=$4; shift 4
    local V=""; for v in "$@"; do V="$V --variant $v"; done
    timeout $to python3 tools/variants_bench.py --order $p $V --rounds $r --calls $c --out $OUT/ov/p$p.json \
      > $OUT/logs/ov$p.log 2>&1; t ov$p $?
    cut -c1-190 $OUT/logs/ov$p.log | grep -E "us +x" | head -8
  }
  ov 511 150 3 3 GEMM_FUSED GEMM_FUSED:overlap_sms=32 GEMM_FUSED:overlap_sms=44 GEMM_FUSED:overlap_sms=56 \
    GEMM GEMM:overlap_sms=32 GEMM:overlap_sms=44
  ov 767 200 2 2 GEMM_FUSED GEMM_FUSED:overlap_sms=32 GEMM_FUSED:overlap_sms=44 GEMM_FUSED:overlap_sms=56 GEMM
  left=$(( 480 - $(elapsed) ))
  [ $left -gt 60 ] && ov 575 $left 3 2 GEMM_FUSED GEMM_FUSED:overlap_sms=32 GEMM_FUSED:overlap_sms=44 GEMM_FUSED:overlap_sms=56 GEMM
  left=$(( 560 - $(elapsed) ))
  [ $left -gt 40 ] && timeout $left python3 -m composer.cli.main graph --path GEMM_FUSED --order 511 --measure \
    --repeats 5 --option GEMM_FUSED.overlap_sms=44 --out $OUT/graph/gf511_ov44.json > $OUT/logs/graph.log 2>&1; t graph $?
  grep -E "overlap gained|measured call|contention|FALLBACK|priority" $OUT/logs/graph.log
else
  export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin2
  sweep_apply docs/data/h200_s21/plans/sweep_plan_budget2.json 7,15,31,63 240 0.01
  unset COMPOSER_SCHEDULES
  left=$(( 300 - $(elapsed) ))
  [ $left -gt 30 ] && timeout $left python3 -m composer.cli.main profile --paths FUSED_TC --orders 7 \
    --out $OUT/prof/tc7 > $OUT/logs/prof.log 2>&1; t prof_tc7 $?
  left=$(( 420 - $(elapsed) ))
  [ $left -gt 30 ] && COMPOSER_SCHEDULES=$PWD/.cache/xf_sched timeout $left python3 -m composer.cli.main profile \
    --paths FUSED_TC --orders 7 --out $OUT/prof/xf7 >> $OUT/logs/prof.log 2>&1; t prof_xf7 $?
  grep -hE "│ fused" $OUT/logs/prof.log | cut -c1-200
  for f in $(find $OUT/prof -name '*.csv'); do gzip $f; done
fi
finish_call ov graph prof sw sched
