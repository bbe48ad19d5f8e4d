#!/usr/bin/env bash
# One device call: install carried wheels, run the GPU tests and a short bench (see docs/device.md).
set -o pipefail
OUT=${OUT:-/tmp/composer-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_CACHE_DIR=/tmp/composer-cache
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
python3 tools/measure_bandwidth.py 2>&1 | tee "$OUT/bandwidth.json"
timeout ${TEST_TIMEOUT:-300} python3 -m pytest -q -m gpu ${GPU_TESTS:-tests/test_paths_gpu.py} -rs -s 2>&1 | tail -60 | tee "$OUT/gpu_tests.log"
