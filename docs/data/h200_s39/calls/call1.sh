#!/usr/bin/env bash
# Session 39 call 1 (H200 for the sweeps; about 560 s): first the L2 partition probe (tools/l2_sides.py, new this
# session, under 30 s, on any GPU): which SMs sit on which of the two L2 partitions, how finely the lines' homes
# interleave, and the L2 read bandwidth of SMs reading their own side's lines against the other side's (issue 16:
# p = 7 and 15 are bound by the link between the partitions); then session 38's call 1 (it stops at once on a GPU
# other than an H200), whose results.tgz also packs this probe's JSON and log (under logs/).
mkdir -p "$OUT/logs"
timeout 120 python3 tools/l2_sides.py --out "$OUT/logs/l2_sides.json" > "$OUT/logs/l2_sides.log" 2>&1
echo "l2_sides rc=$? $SECONDS s" >> "$OUT/logs/times.txt"
cat "$OUT/logs/l2_sides.log"
LIMIT=$(( 540 - SECONDS )) exec bash docs/data/h200_s38/calls/call1.sh
