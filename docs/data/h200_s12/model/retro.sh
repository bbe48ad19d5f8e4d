#!/usr/bin/env bash
# Retrospective errors of MODEL on every restricted bench below 66 SMs of balance tests 1-6 (not a test:
# these runs are measured; the per-family median errors become the next prospective test's screen).
# Usage: bash docs/data/h200_s12/model/retro.sh MODEL.json OUTDIR   (from the repository root)
set -euo pipefail
MODEL=$1; OUT=$2; mkdir -p "$OUT"
B=docs/data
predict() {  # NAME SMS ORDERS MEASURED...
  local name=$1 sms=$2 orders=$3; shift 3
  composer model predict --model "$MODEL" --machine h200 --build .cache/build_s9 --mma 16x8x4 --sms "$sms" \
    --orders "$orders" --out "$OUT/${name}_sms$sms.json" > /dev/null
  MEASURED+=("$@")
}
MEASURED=()
predict t1 34 63,255,511 $B/h200_s8/call3/bal/lo_sms34 $B/h200_s8/call3/bal/p511_sms34
predict t1 52 63,255,511 $B/h200_s8/call3/bal/lo_sms52 $B/h200_s8/call3/bal/p511_sms52
predict t2 24 63,255 $B/h200_s8/call6/bal/lo_sms24
predict t2 44 63,255 $B/h200_s8/call6/bal/lo_sms44
predict t3 38 63,255 $B/h200_s9/call2/bal/lo_sms38
predict t3 58 63,255 $B/h200_s9/call2/bal/lo_sms58
predict t3b 50 7,15,31,127 $B/h200_s9/call4/bal/lo_sms50
predict t4 42 7,15,31,63,127,255 $B/h200_s10/call3/bal/sms42
for n in 56 46 30; do predict t5 $n 7,15,31,63,127,255 $B/h200_s11/call1/bal/sms$n; done
for n in 62 36 26; do predict t6 $n 7,15,31,63,127,255 $B/h200_s11/call6/bal/sms$n; done
composer model score --predictions "$OUT"/t*_sms*.json --measured "${MEASURED[@]}" --out "$OUT/score_below66.json" \
  | tail -4
