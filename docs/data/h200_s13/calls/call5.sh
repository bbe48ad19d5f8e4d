#!/usr/bin/env bash
# Session 13, device call 5 (issue 14, item 4: "measure where it wins, per order"): the staged flux at the
# orders calls 1 and 3 did not run, the y carrier (the shipped one at every order but 63): `composer sweep-carrier
# --order P --only carrier=y,fold=off,flux=staged` at p = 7, 15, 31, 255, 575 and 767 (the 64 MiB carry
# the y carrier alone at 767 (the sweep's 5 candidates took 150 s there in session 12); each candidate
# validated against the NumPy reference on the point-varying input at the Table S29 grid, then 5
# interleaved rounds against the shipped setting. Build .cache/build_s13 (`composer build --arch sm_90
# --orders 7,15,31,255,575,767 --paths GEMM_CUTE,GEMM_FUSED --fused-variants all`) filtered to the staged
# kernels, p = 7's mainloop ones and the shipped references (.cache/build_s13dev).
# Carry: .whl .cache/build_s13dev .cache/commit.
set -o pipefail
source tools/device_prelude.sh
export COMPOSER_BUILD_DIR=$PWD/.cache/build_s13dev
mkdir -p $OUT/gf
sweep() {  # ORDER LIMIT ONLY...
  local p=$1 lim=$2; shift 2
  local L=$(( 320 - $(elapsed) )); [ $L -lt 30 ] && { t "skip staged$p (budget)" 0; return; }; [ $L -gt $lim ] && L=$lim
  timeout $L python3 -m composer.cli.main sweep-carrier --order $p "$@" --schedules-dir $OUT/gf/sched \
    --out $OUT/gf/staged$p.json > $OUT/logs/staged$p.log 2>&1; t staged$p $?
}
sweep 7 40 --only carrier=y,fold=off,flux=staged
sweep 15 40 --only carrier=y,fold=off,flux=staged
sweep 31 40 --only carrier=y,fold=off,flux=staged
sweep 255 60 --only carrier=y,fold=off,flux=staged
sweep 575 90 --only carrier=y,fold=off,flux=staged
sweep 767 100 --only carrier=y,fold=off,flux=staged
nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv >> $OUT/logs/times.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz logs gf 2>/dev/null
rm -rf $OUT/gf
cat $OUT/logs/times.txt; grep -hE 'winner|wrote' $OUT/logs/staged*.log | head -20
