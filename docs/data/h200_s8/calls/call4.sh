#!/usr/bin/env bash
# Session 8, device call 4: call 3's prospective balance axis missed at p = 63 for the DRAM-bound
# kernels (GEMM_FUSED -17 ... -44 %, FUSED_TC -13 ... -17 %: predicted as fast at 98 SMs as at 132,
# measured 16-27 % slower). The model's hypothesis, "restricting SMs removes SMs, not bandwidth", is
# tested directly here: (a) a copy kernel's bandwidth inside green contexts of N SMs
# (tools/measure_bandwidth.py --sms); (b) ncu of GEMM_FUSED and FUSED_TC at p = 63 inside a
# 66-SM green context (per-kernel DRAM throughput against the 132-SM calibration).
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/bw $OUT/prof
timeout 150 python3 tools/measure_bandwidth.py --sms 132,120,112,104,98,90,80,66,52,34,16,8 --out $OUT/bw/bandwidth_sms.json \
  > $OUT/logs/bandwidth.log 2>&1; t bandwidth $?
COMPOSER_BUILD_DIR=$PWD/.cache/build_bal timeout 100 python3 -m composer.cli.main profile --paths GEMM_FUSED,FUSED_TC \
  --orders 63 --sms 66 --out $OUT/prof/sms66 > $OUT/logs/prof_sms66.log 2>&1; t prof_sms66 $?
tar -C $OUT -czf $OUT/results.tgz logs bw prof 2>/dev/null
rm -rf $OUT/bw $OUT/prof
cat $OUT/logs/times.txt; tail -16 $OUT/logs/bandwidth.log | grep -v '^ *"' ; grep SMs $OUT/logs/bandwidth.log
