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
t() { echo "$1 rc=$2 $(( $(date +%s) - T0 )) s" >> "$OUT/logs/times.txt"; }
elapsed() { echo $(( $(date +%s) - T0 )); }
