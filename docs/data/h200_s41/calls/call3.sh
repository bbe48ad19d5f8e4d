#!/usr/bin/env bash
# Session 41 call 3 (any GPU; about 520 s, `LIMIT=S` for less): calls 1 and 2 in one start, most wanted first, for a
# session whose device time allows one machine (each refused start cost 90-180 s).
# 1. The GEMM parity tests (tests/test_parity_gpu.py) and tools/variants_bench.py at p = 255 and 511 (GEMM against
#    GEMM:parity=on, GEMM_FUSED at 511; each variant validated first, 3 rounds of 3 calls).
# 2. The fused parity sweep at p = 31 and 63 (`sweep-fused run --timing stages` of sweep_plan_parity.json, every
#    candidate validated first), applied at 1 %, then A B B A benches of GEMM, FUSED_TC, FUSED_TC16 where it changed.
# On a GPU other than an H200 the generic fused tables (COMPOSER_SCHEDULE_MACHINE=generic), as the plan was made.
# Carry: .whl .cache (nvrtc_pin9 filled for the plan, build_s22 for GEMM_FUSED at 511, commit).
source tools/device_prelude.sh
LIMIT=${LIMIT:-520}
call_start .cache/nvrtc_pin9 v ab prof
timeout 120 python3 -m pytest -v -m gpu -p no:cacheprovider tests/test_parity_gpu.py > "$OUT/logs/parity_tests.log" 2>&1
t parity_tests $?
tail -3 "$OUT/logs/parity_tests.log"
grep -h "max|diff|" "$OUT/logs/parity_tests.log"
for p in 255 511; do
  extra=()
  [[ $p == 511 ]] && extra=(--variant GEMM_FUSED)
  COMPOSER_BUILD_DIR=$PWD/.cache/build_s22 timeout 100 python3 tools/variants_bench.py --order $p --variant GEMM \
    --variant GEMM:parity=on "${extra[@]}" --rounds 3 --calls 3 --out "$OUT/v/p$p.json" > "$OUT/logs/v$p.log" 2>&1
  t "v$p" $?
  tail -5 "$OUT/logs/v$p.log"
done
[[ "$GPU" == *H200* ]] || export COMPOSER_SCHEDULE_MACHINE=generic
left=$(( LIMIT - 150 - $(elapsed) ))
sweep_apply docs/data/h200_s41/plans/sweep_plan_parity.json 31,63 $(( left < 200 ? left : 200 )) 0.01 --timing stages
grep -E '^\{' "$OUT/logs/sweep.log" | cut -c1-200
unset COMPOSER_SCHEDULES
B=$OUT/sched
CHANGED=$(applied_orders "$B")
echo "applied at: ${CHANGED:-none}" | tee -a "$OUT/logs/times.txt"
left=$(( LIMIT - $(elapsed) ))
if [ -n "$CHANGED" ] && [ $left -gt 100 ]; then
  ab_benches "$B" GEMM,FUSED_TC,FUSED_TC16 "$CHANGED" $(( (left - 20) / 4 )) ab
fi
finish_call v ab prof sw sched
