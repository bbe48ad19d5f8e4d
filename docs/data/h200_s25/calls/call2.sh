#!/usr/bin/env bash
# Session 25, device call 2 (issue 14: GEMM_FUSED <= 0.90 x GEMM at p = 511, 575, 767), on any GPU. New carrier
# tile key `stagger_us` (composer/gemm/cute/config.py): the first wave's blocks wait bid / resident of the period
# before their mainloop, so that the blocks sharing an SM run out of phase and one block's epilogue reads (five
# volume arrays) overlap another's MMAs (session 10 ncu at 511: 18.6 us of MMA + 12.3 us of epilogue DRAM per
# tile per SM, summed: the phases do not overlap). `composer sweep-carrier --tiles --only st` at each order: the
# shipped carrier and the same tile staggered over 25, 50 and 100 us, each validated against the NumPy reference on
# the point-varying input, then timed in interleaved rounds; a winner goes into $OUT/gf/sched, and GEMM and
# GEMM_FUSED are benched in one run at 511 with it.
# Build: .cache/build_st (`composer build --arch sm_90 --paths GEMM_FUSED --orders 511,575,767 --fused-variants
# tiles --out .cache/build_st25`, then `python3 tools/filter_build.py .cache/build_st25 .cache/build_st
# '_carry_0$' 'st[0-9]+_0$' '^(?!dgemm_p[0-9]{4}_y_)'`). Carry: .whl .cache/commit .cache/build_st
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_st
mkdir -p $OUT/gf/sched
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
sweep() {  # sweep ORDER TIMEOUT
  timeout $2 python3 -m composer.cli.main sweep-carrier --order $1 --tiles --only st --rounds 5 \
    --schedules-dir $OUT/gf/sched --out $OUT/gf/st$1.json > $OUT/logs/st$1.log 2>&1; t st$1 $?
  grep -E "µs|us |winner|wrote|valid|Error|error" $OUT/logs/st$1.log | cut -c1-200 | tail -9
}
sweep 511 170
left=$(( 290 - $(elapsed) ))
if [ -f $OUT/gf/sched/p0511.toml ] && [ $left -gt 60 ]; then
  for f in schedules/p0*.toml; do [ -f "$OUT/gf/sched/$(basename "$f")" ] || cp "$f" "$OUT/gf/sched/"; done
  COMPOSER_SCHEDULES=$OUT/gf/sched timeout $left python3 -m composer.cli.main bench --paths GEMM,GEMM_FUSED \
    --orders 511 --rounds 2 --out $OUT/gf/bench511 > $OUT/logs/bench511.log 2>&1; t bench511 $?
  grep -E "^\| (GEMM|FUSED)" $OUT/logs/bench511.log | cut -d'|' -f2,3,6,10,11
fi
left=$(( 320 - $(elapsed) )); [ $left -gt 60 ] && sweep 575 $left
left=$(( 320 - $(elapsed) )); [ $left -gt 90 ] && sweep 767 $left
finish_call gf
