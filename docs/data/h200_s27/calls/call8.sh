#!/usr/bin/env bash
# Session 27 call 8: on an H200, call7.sh. On another GPU (about 90 s): which L2 sub-unit is the "L2 91 %" of
# the p = 7 and 15 box kernels (ncu's breakdown of lts__throughput, which composer profile reports only as a
# whole): FUSED_TC at p = 7 and FUSED_TC16 at p = 15, shipped and (p = 15) on the tile_swizzle table of call 3.
# Carry: .whl .cache/commit .cache/build_s22 .cache/nvrtc_pin4. KEEP="docs/data/h200_s26 docs/data/h200_s27".
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* ]]; then exec bash docs/data/h200_s27/calls/call7.sh; fi
set -o pipefail
source tools/device_prelude.sh
mkdir -p $OUT/brk
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv | tee $OUT/logs/gpu.txt
export COMPOSER_CACHE_DIR=$PWD/.cache/nvrtc_pin4
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
M="breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,breakdown:l1tex__throughput.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,dram__bytes.sum"
brk() {  # NAME PATH ORDER [SCHEDULES_DIR]
  local sched=${4:-}
  COMPOSER_SCHEDULES=$sched timeout 60 $NCU --target-processes all --profile-from-start off --clock-control none \
    --csv --page raw --print-units base --metrics $M --log-file $OUT/brk/$1.csv \
    python3 -m composer.profile.target $2 $3 > $OUT/logs/$1.log 2>&1
  t $1 $?
}
mkdir -p $OUT/swzsched && cp schedules/p0*.toml $OUT/swzsched/
python3 - "$OUT/swzsched/p0015.toml" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
head, sep, rest = s.partition("[paths.FUSED_TC16]")
body, sep2, tail = rest.partition("\n[paths.")
body = re.sub(r"flux_tiles = 2\n", "tile_swizzle = true\n", body)  # call 3's winner: three tiles resident, swizzled
open(p, "w").write(head + sep + body + sep2 + tail)
PY
grep -A12 "paths.FUSED_TC16\]" $OUT/swzsched/p0015.toml | grep -v "^#" | head -12
brk tc7 FUSED_TC 7
brk tc16_15 FUSED_TC16 15
brk tc16_15swz FUSED_TC16 15 $OUT/swzsched
python3 - $OUT/brk <<'PY'
import csv, io, sys, pathlib
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.csv")):
    txt = f.read_text()
    if '"ID"' not in txt:
        print(f.name, "no rows"); continue
    rows = list(csv.DictReader(io.StringIO(txt[txt.index('"ID"'):])))[1:]
    for r in rows:
        if "fused_tc" not in r["Kernel Name"]:
            continue
        vals = []
        for k, v in r.items():
            try:
                x = float(v.replace(",", ""))
            except (ValueError, AttributeError):
                continue
            if "pct" in k and x >= 40:
                vals.append((x, k))
        print(f.name, r["Kernel Name"], r.get("gpu__time_duration.sum"), r.get("dram__bytes.sum"))
        for x, k in sorted(vals, reverse=True)[:14]:
            print(f"   {x:6.1f} {k}")
PY
finish_call brk
