#!/usr/bin/env bash
# One device call running several `composer bench` sweeps; results come back as one tarball.
# Usage (repo root, on the GPU machine): tools/device_sweep.sh "ARGS1" "ARGS2" ...
# Each ARGS is passed to `composer bench` with --out $OUT/sweepN; COMPOSER_GIT_COMMIT names the
# commit in provenance.json (the copied tree has no .git). Wheels in .whl/ are installed first.
set -o pipefail
OUT=${OUT:-/tmp/composer-out}
mkdir -p "$OUT"
if ! python3 -c "import nvmath" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COMPOSER_CACHE_DIR=${COMPOSER_CACHE_DIR:-$PWD/.cache/fused}
n=0
for args in "$@"; do
  n=$((n + 1))
  echo "== composer bench $args"
  # shellcheck disable=SC2086
  python3 -m composer.cli.main bench $args --out "$OUT/sweep$n" 2>&1 | grep -v '^\[' | tee "$OUT/sweep$n.log" | tail -25
  # One tarball per sweep, made at once: what finished survives a later time-out.
  tar -C "$OUT" -czf "$OUT/sweep$n.tgz" "sweep$n" && rm -rf "${OUT:?}/sweep$n"
done
