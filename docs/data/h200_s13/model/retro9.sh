#!/usr/bin/env bash
# Retrospective (not a test: every run here is measured) errors of MODEL on every restricted bench of
# balance tests 1-8 that is not at a calibration SM count (66 and 132 are calibrated at every order),
# scored per SM band: below 66 SMs and between 66 and 132. The per-family medians over tests 1-8 are
# balance test 9's family errors (docs/data/h200_s13/model/README.md). retro.sh (tests 1-7, test 8's
# family errors) with test 8's three SM counts added; the cells of tests 1-7 are the same.
# Usage: bash docs/data/h200_s13/model/retro9.sh MODEL.json OUTDIR [JOBS]   (from the repository root)
# Writes OUTDIR/t*_smsN.json (predictions, reproducible, not kept), OUTDIR/score_{below66,66to132}_t1-6.json
# (the bands before test 7), score_{below66,66to132}_t1-7.json (before test 8: retro/score_*.json of
# retro.sh), score_below66.json, score_66to132.json, score_all.json (tests 1-8).
set -euo pipefail
MODEL=$1; OUT=$2; JOBS=${3:-2}; mkdir -p "$OUT"
B=docs/data
# name sms orders measured-dirs...
CELLS=(
  "t1 34 63,255,511 $B/h200_s8/call3/bal/lo_sms34 $B/h200_s8/call3/bal/p511_sms34"
  "t1 52 63,255,511 $B/h200_s8/call3/bal/lo_sms52 $B/h200_s8/call3/bal/p511_sms52"
  "t1 96 63,255,511 $B/h200_s8/call3/bal/lo_sms96 $B/h200_s8/call3/bal/p511_sms96"
  "t1 98 63,255,511 $B/h200_s8/call3/bal/lo_sms98 $B/h200_s8/call3/bal/p511_sms98"
  "t2 24 63,255 $B/h200_s8/call6/bal/lo_sms24"
  "t2 44 63,255 $B/h200_s8/call6/bal/lo_sms44"
  "t2 80 63,255 $B/h200_s8/call6/bal/lo_sms80"
  "t2 116 63,255 $B/h200_s8/call6/bal/lo_sms116"
  "t3 38 63,255 $B/h200_s9/call2/bal/lo_sms38"
  "t3 58 63,255 $B/h200_s9/call2/bal/lo_sms58"
  "t3 88 63,255 $B/h200_s9/call2/bal/lo_sms88"
  "t3 106 63,255 $B/h200_s9/call2/bal/lo_sms106"
  "t3 124 63,255 $B/h200_s9/call2/bal/lo_sms124"
  "t3b 50 7,15,31,127 $B/h200_s9/call4/bal/lo_sms50"
  "t3b 100 7,15,31,127 $B/h200_s9/call4/bal/lo_sms100"
  "t4 42 7,15,31,63,127,255 $B/h200_s10/call3/bal/sms42"
  "t4 76 7,15,31,63,127,255 $B/h200_s10/call3/bal/sms76"
  "t4 112 7,15,31,63,127,255 $B/h200_s10/call3/bal/sms112"
  "t5 56 7,15,31,63,127,255 $B/h200_s11/call1/bal/sms56"
  "t5 46 7,15,31,63,127,255 $B/h200_s11/call1/bal/sms46"
  "t5 30 7,15,31,63,127,255 $B/h200_s11/call1/bal/sms30"
  "t6 62 7,15,31,63,127,255 $B/h200_s11/call6/bal/sms62"
  "t6 36 7,15,31,63,127,255 $B/h200_s11/call6/bal/sms36"
  "t6 26 7,15,31,63,127,255 $B/h200_s11/call6/bal/sms26"
  "t7 28 7,15,31,63,127,255 $B/h200_s12/call2/bal/sms28"
  "t7 48 7,15,31,63,127,255,511 $B/h200_s12/call2/bal/sms48 $B/h200_s12/call2/bal/p511_sms48"
  "t7 70 7,15,31,63,127,255 $B/h200_s12/call3/bal/sms70"
  "t7 90 7,15,31,63,127,255 $B/h200_s12/call3/bal/sms90"
  "t8 94 7,15,31,63,127,255 $B/h200_s13/call2/bal/sms94"
  "t8 54 7,15,31,63,127,255 $B/h200_s13/call2/bal/sms54"
  "t8 32 7,15,31,63,127,255 $B/h200_s13/call2/bal/sms32"
)
for c in "${CELLS[@]}"; do
  set -- $c
  f="$OUT/${1}_sms$2.json"
  [ -s "$f" ] && continue
  echo "composer model predict --model $MODEL --machine h200 --build .cache/build_s9 --mma 16x8x4 --sms $2 --orders $3 --out $f > /dev/null"
done | xargs -P "$JOBS" -I{} sh -c {}
score() {  # OUTFILE FILTER(awk on name sms)
  local out=$1 filter=$2 preds=() meas=()
  for c in "${CELLS[@]}"; do
    set -- $c
    if awk -v t="$1" -v n="$2" "BEGIN{exit !($filter)}"; then
      preds+=("$OUT/${1}_sms$2.json"); shift 3; meas+=("$@")
    fi
  done
  composer model score --predictions "${preds[@]}" --measured "${meas[@]}" --out "$OUT/$out" | tail -3
}
score score_below66_t1-6.json 'n < 66 && t != "t7" && t != "t8"'
score score_66to132_t1-6.json 'n > 66 && n < 132 && t != "t7" && t != "t8"'
score score_below66_t1-7.json 'n < 66 && t != "t8"'
score score_66to132_t1-7.json 'n > 66 && n < 132 && t != "t8"'
score score_below66.json 'n < 66'
score score_66to132.json 'n > 66 && n < 132'
score score_all.json '1'
