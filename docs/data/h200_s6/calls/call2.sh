#!/usr/bin/env bash
# Session 6, device call 2: the scheduler's overlap figures (composer graph --measure) per order for
# the library paths and the fastest fused path: node times, serial sum, critical path, measured
# call, overlap gained, launch gaps, contention estimate.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_sm90
mkdir -p $OUT/graph
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_sched_gpu.py > $OUT/logs/sched_gpu_tests.log 2>&1; t sched_gpu_tests $?
for order in 7 15 31 63 127 255 511 767; do
  timeout 150 python3 -m composer.cli.main graph --path GEMM,GEMM_CUTE,FUSED_TC16 --order $order --measure \
    --repeats 10 --out $OUT/graph/p$order.json > $OUT/logs/graph_p$order.log 2>&1; t graph_p$order $?
done
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs graph 2>/dev/null
cat $OUT/logs/times.txt; tail -3 $OUT/logs/sched_gpu_tests.log
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob(os.environ["OUT"] + "/graph/p*.json"), key=lambda s: int(s.split("/p")[-1][:-5])):
    d = json.load(open(f))
    for r in d.get("paths", [d]):
        m = r["measure"]
        print(f'p{d["order"]:>4} {r["path"]:<11} serial {m["serial_sum_ms"]*1e3:9.1f} crit {m["critical_path_ms"]*1e3:9.1f} '
              f'call {m["measured_ms"]*1e3:9.1f} serialcall {m["serial_call_ms"]*1e3:9.1f} gaps {m["launch_gaps_ms"]*1e3:7.1f} '
              f'overlap {m["overlap_ms"]*1e3:8.1f} ({m["overlap_pct"]:5.2f}%) est {m["predicted_ms"]*1e3:9.1f} ({m["prediction_error_pct"]:+.1f}%)')
PY
