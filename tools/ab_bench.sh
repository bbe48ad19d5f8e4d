# Sourced by a device-call script after tools/device_prelude.sh: `ab_bench ALTERNATIONS PATHS ORDERS [BENCH ARGS...]`
# benches PATHS at ORDERS (3 rounds each run) alternating this tree and the tree in .cache/old (the
# pre-scheduler tree 0b9951d of the launch-cost target, or any tree to compare against), each run from
# its own directory so that `python -m` imports the right composer (sessions 6 and 7: an old run
# started from this tree's directory imports this tree). Results under $OUT/ab/{new,old}N, logs under
# $OUT/logs/ab_{new,old}N.log (each names the composer it imported), times in $OUT/logs/times.txt.
ab_bench() {
  local alternations=$1 paths=$2 orders=$3; shift 3
  local root=$PWD round tree dir
  mkdir -p "$OUT/ab"
  for round in $(seq 1 "$alternations"); do
    for tree in new old; do
      dir=$root; [ $tree = old ] && dir=$root/.cache/old
      (cd "$dir" && PYTHONPATH=/tmp/site python3 -c "import composer; print('imports', composer.__file__)" \
        > "$OUT/logs/ab_$tree$round.log" 2>&1 && PYTHONPATH=/tmp/site timeout 90 python3 -m composer.cli.main bench \
        --paths "$paths" --orders "$orders" --rounds 3 --out "$OUT/ab/$tree$round" "$@" >> "$OUT/logs/ab_$tree$round.log" 2>&1)
      t "ab_$tree$round" $?
    done
  done
}
