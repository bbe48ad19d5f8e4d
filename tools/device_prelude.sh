# Sourced at the top of a device call (`source tools/device_prelude.sh`): installs the carried
# wheels, points Python at them and at this tree, names the commit for the provenance records
# ($COMPOSER_GIT_COMMIT from .cache/commit, written here before the call), and defines `t NAME RC`,
# which appends "NAME rc=RC <seconds since the start> s" to $OUT/logs/times.txt.
T0=$(date +%s)
mkdir -p "$OUT/logs"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/logs/pip.log" 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
[ -f .cache/commit ] && export COMPOSER_GIT_COMMIT=$(cat .cache/commit)
t() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/logs/times.txt"; checkpoint; }
# `checkpoint` (after every step, through `t`): everything under $OUT but archives packed into $OUT/results.tgz, so that a call cut
# off by its limit or by the session's device time still brings its finished steps back in one file (the device
# returns only a few loose files of a call; session 34's first call lost seven logs that way).
checkpoint() {
  tar -C "$OUT" --exclude='*.tgz' -czf /tmp/composer_partial.tgz . 2>/dev/null \
    && mv -f /tmp/composer_partial.tgz "$OUT/results.tgz"
}
elapsed() { echo $(( $(date +%s) - T0 )); }
# `sweep_apply PLAN ORDERS BUDGET_S MIN_GAIN [RUN_ARGS...]` (RUN_ARGS go to `sweep-fused run`, e.g. --timing stages; MIN_GAIN a fraction, 0.01 for 1 %, as `sweep-fused apply --min-gain` takes it;
# sessions 32-33 passed 1, which asked for a 100 % gain and applied nothing, and which --min-gain now refuses):
# `composer sweep-fused run` of PLAN at ORDERS into $OUT/sw (log
# $OUT/logs/sweep.log), its winners applied into $OUT/sched (log apply.log); when any table changed, the other
# schedules are copied beside them and COMPOSER_SCHEDULES points there, so that the rest of the call runs them.
sweep_apply() {
  mkdir -p "$OUT/sw" "$OUT/sched"
  timeout $(( $3 + 50 )) python3 -m composer.cli.main sweep-fused run --orders "$2" --plan "$1" --out "$OUT/sw" \
    --budget "$3" "${@:5}" > "$OUT/logs/sweep.log" 2>&1; t sweep $?
  python3 -m composer.cli.main sweep-fused apply "$OUT/sw/sweep.json" --schedules-dir "$OUT/sched" --min-gain "$4" \
    > "$OUT/logs/apply.log" 2>&1; t apply $?
  if ls "$OUT"/sched/p*.toml > /dev/null 2>&1; then
    for f in schedules/p0*.toml; do [ -f "$OUT/sched/$(basename "$f")" ] || cp "$f" "$OUT/sched/"; done
    export COMPOSER_SCHEDULES=$OUT/sched
  fi
}
# `applied_orders DIR`: the orders whose schedule in DIR differs from the shipped one (comma-separated, "" if none),
# after a `sweep_apply`; with any, the other shipped schedules are copied beside them so that DIR is complete.
applied_orders() {
  local dir=$1 f changed
  changed=$(for f in "$dir"/p0*.toml; do [ -f "$f" ] || continue; cmp -s "$f" "schedules/$(basename "$f")" || basename "$f" .toml; done \
    | sed 's/^p0*//' | paste -sd, -)
  if [ -n "$changed" ]; then
    for f in schedules/p0*.toml; do [ -f "$dir/$(basename "$f")" ] || cp "$f" "$dir/"; done
  fi
  echo "$changed"
}
# `finish_call DIR...`: the SM clock and throttle reasons into times.txt, then logs and the DIRs under $OUT packed into
# $OUT/results.tgz (the DIRs removed: one file comes back), and the call's timings, the applied tables and the
# sweep's one-line records printed.
finish_call() {
  nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> "$OUT/logs/times.txt" 2>&1
  tar -C "$OUT" -czf "$OUT/results.tgz" logs "$@" 2>/dev/null
  for d in "$@"; do rm -rf "${OUT:?}/$d"; done
  cat "$OUT/logs/times.txt"
  [ -f "$OUT/logs/apply.log" ] && cat "$OUT/logs/apply.log"
  [ -f "$OUT/logs/sweep.log" ] && grep -E '^\{' "$OUT/logs/sweep.log" | cut -c1-230
  return 0
}
# `ab_benches B PATHS ORDERS TIMEOUT_S [NAME]`: alternating benches A B B A (3 rounds each) of PATHS at ORDERS into
# $OUT/NAME/A1, B1, B2, A2 (NAME: ab when not given), A the schedules as shipped, B the schedules directory B
# ($COMPOSER_SCHEDULES), each bench bounded by TIMEOUT_S; the comparison (tools/compare_benches.py) into
# $OUT/logs/NAME_compare.log and stdout.
ab_benches() {
  local name=${5:-ab}
  mkdir -p "$OUT/$name"
  for run in A1 B1 B2 A2; do
    if [[ $run == B* ]]; then export COMPOSER_SCHEDULES=$1; else unset COMPOSER_SCHEDULES; fi
    timeout "$4" python3 -m composer.cli.main bench --paths "$2" --orders "$3" --rounds 3 --out "$OUT/$name/$run" \
      > "$OUT/logs/${name}_$run.log" 2>&1; t "${name}_$run" $?
  done
  unset COMPOSER_SCHEDULES
  python3 tools/compare_benches.py --a "$OUT/$name/A1" "$OUT/$name/A2" --b "$OUT/$name/B1" "$OUT/$name/B2" \
    > "$OUT/logs/${name}_compare.log" 2>&1
  cat "$OUT/logs/${name}_compare.log"
}
# `call_start CACHE DIR...`: the preamble of a call script after sourcing this file: pipefail, $OUT/DIR... made,
# the GPU recorded (record_gpu), COMPOSER_CACHE_DIR=$PWD/CACHE (the pinned CUBINs carried in .cache) and M the CLI.
call_start() {
  set -o pipefail
  local cache=$1 d
  shift
  for d in "$@"; do mkdir -p "$OUT/$d"; done
  record_gpu
  export COMPOSER_CACHE_DIR=$PWD/$cache
  M="python3 -m composer.cli.main"
}
# `record_gpu`: the GPU's name, memory, clocks, power limit and driver into $OUT/logs/gpu.txt (and stdout), its
# name in $GPU. `h200_only`: after record_gpu, on any other GPU say so, pack the logs and end the call (exit 0):
# the device may lend an H100 to a call that names nvidia-h200 (docs/device.md).
record_gpu() {
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee "$OUT/logs/gpu.txt"
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
}
h200_only() {
  if [[ "$GPU" != *H200* ]]; then echo "not an H200 ($GPU): stopping"; finish_call; exit 0; fi
}
# `named_bench NAME TIMEOUT_S PATHS ORDERS ROUNDS [BUILD_DIR]`: `composer bench` into $OUT/bench/NAME (log
# $OUT/logs/bench_NAME.log), from the `composer build` directory BUILD_DIR when given, its result rows printed:
# the pending benches several call scripts carry (FUSED_DFMA beside FUSED_TC, p = 767's GEMM and GEMM_FUSED).
named_bench() {
  local name=$1 limit=$2 paths=$3 orders=$4 rounds=$5 build=${6:-}
  mkdir -p "$OUT/bench"
  if [ -n "$build" ]; then export COMPOSER_BUILD_DIR=$PWD/$build; fi
  timeout "$limit" python3 -m composer.cli.main bench --paths "$paths" --orders "$orders" --rounds "$rounds" \
    --out "$OUT/bench/$name" > "$OUT/logs/bench_$name.log" 2>&1; t "bench_$name" $?
  unset COMPOSER_BUILD_DIR
  grep -E "^\| (FUSED|GEMM)" "$OUT/logs/bench_$name.log" | cut -d'|' -f2,3,6,10
}
# `ab_where_applied PATHS`: after a `sweep_apply`, A B B A benches of PATHS (`ab_benches` into $OUT/ab) at the orders
# whose table changed in $OUT/sched, with what $LIMIT leaves; below 320 s left only the first changed order (p = 767's
# benches take about twice p = 511's, H200 session 5), below 100 s none.
ab_where_applied() {
  local changed left
  changed=$(applied_orders "$OUT/sched")
  echo "applied at: ${changed:-none}" | tee -a "$OUT/logs/times.txt"
  left=$(( LIMIT - 10 - $(elapsed) ))
  [ $left -lt 320 ] && changed=${changed%%,*}
  if [ -n "$changed" ] && [ $left -gt 100 ]; then
    ab_benches "$OUT/sched" "$1" "$changed" $(( (left - 20) / 4 )) ab
  fi
}
