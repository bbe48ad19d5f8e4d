#!/usr/bin/env bash
# Session 14, device call 3.
# (1) Issue 16: deeper pipelines for the y and z kernels of the p = 511 FUSED_TC16 table shipped after call 2
#     (the stream_depth family, the per-kernel `stages` key; ncu in call 2 called its z kernel latency bound),
#     each validated at the Table S29 grid and timed after the shipped table; apply with --min-gain 0.01 into
#     $OUT/sched; if anything was applied, `composer bench --paths GEMM,FUSED_TC16 --orders 511 --rounds 3` on it.
#     Plan: docs/data/h200_s14/plans/sweep_plan_depth.json (tracked).
# (2) Issue 15: balance test 10, prospective: every path at p = 7-255 on 110, 78 and 60 SMs. Predictions
#     (model 4b2fae54) and the scoring rules (test 9's, unchanged) are in docs/data/h200_s14/model, committed
#     before this call. Each SM count gets at most 150 s.
# Carry: .whl .cache/build_s13bal .cache/commit (build_s13bal: .cache/build_s9 filtered to p <= 255).
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/depth $OUT/sched $OUT/bench $OUT/bal
timeout 150 python3 -m composer.cli.main sweep-fused run --orders 511 \
  --plan docs/data/h200_s14/plans/sweep_plan_depth.json --out $OUT/depth --budget 120 > $OUT/logs/sweep_depth.log 2>&1
t sweep_depth $?
python3 -m composer.cli.main sweep-fused apply $OUT/depth/sweep.json --schedules-dir $OUT/sched --min-gain 0.01 \
  > $OUT/logs/apply.log 2>&1; t apply $?
if [ -f $OUT/sched/p0511.toml ]; then
  COMPOSER_SCHEDULES=$OUT/sched timeout 100 python3 -m composer.cli.main bench --paths GEMM,FUSED_TC16 --orders 511 \
    --rounds 3 --out $OUT/bench/p511 > $OUT/logs/bench511.log 2>&1; t bench511 $?
fi
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s13bal
ALL=GEMM,GEMM_CUTE,GEMM_FUSED,FUSED,FUSED_TC,FUSED_DFMA,FUSED_TC16
for N in 110 78 60; do
  L=$(( 580 - $(elapsed) )); [ $L -lt 60 ] && { t "skip sms$N (budget)" 0; break; }; [ $L -gt 150 ] && L=150
  timeout $L python3 -m composer.cli.main bench --paths $ALL --orders 7,15,31,63,127,255 --rounds 2 --sms $N \
    --out $OUT/bal/sms$N > $OUT/logs/bench_sms$N.log 2>&1; t "bench sms$N" $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs depth sched bench bal 2>/dev/null
rm -rf $OUT/depth $OUT/bench $OUT/bal
cat $OUT/logs/times.txt; cat $OUT/logs/apply.log; grep -E '^\{' $OUT/logs/sweep_depth.log; tail -8 $OUT/logs/bench511.log 2>/dev/null
