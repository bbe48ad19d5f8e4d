#!/usr/bin/env bash
# The tree a device call sends: tracked files plus untracked files git does not ignore, at most 64 MiB with
# the carried paths. docs/data and docs/report (the measurements and the rendered report, about 75 MB in session
# 24) are read by `composer report`, the model's retrospective fits and the CPU tests, never by a device call.
#
#   tools/device_slim.sh on      untrack them in the index only (the files stay on disk) and ignore them, so
#                                that they do not travel; refuses when the index holds staged changes
#   tools/device_slim.sh off     track them again exactly as HEAD has them (git reset of the index)
#   tools/device_slim.sh status  what would travel now, in bytes (tracked files only; add the carried paths)
#
# While it is on, a pre-commit hook (installed by `on`, removed by `off`) refuses every commit: a commit then
# would delete the data from the repository. Keep the session's own new data (docs/data/<this session>) tracked:
# KEEP names the directories left in, default the newest h200_s*/h100_s* directory.
set -euo pipefail
top=$(git rev-parse --show-toplevel)
cd "$top"
gitdir=$(git rev-parse --git-dir)
marker="$gitdir/composer-device-slim"
exclude="$gitdir/info/exclude"
hook="$gitdir/hooks/pre-commit"
tag="# composer device_slim"

tracked_bytes() { git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }  # summed over every xargs batch

case "${1:-status}" in
  on)
    if [ -f "$marker" ]; then echo "device_slim: already on ($(tracked_bytes) bytes tracked)"; exit 0; fi
    if ! git diff --cached --quiet; then
      echo "device_slim: the index holds staged changes; commit or unstage them first" >&2; exit 2
    fi
    keep=${KEEP:-$(ls -d docs/data/h[0-9]*_s[0-9]* 2>/dev/null | sort -t s -k 3 -n | tail -1)}
    mkdir -p "$gitdir/info" "$gitdir/hooks"
    : > "$marker"
    for d in docs/report docs/data/*/; do
      d=${d%/}
      [ -d "$d" ] || continue
      case " $keep " in *" $d "*) continue ;; esac
      printf '/%s/\n' "$d" >> "$exclude"
      echo "$d" >> "$marker"
      git rm -r -q --cached --ignore-unmatch "$d"
    done
    printf '#!/bin/sh\n%s\necho "device_slim is on: run tools/device_slim.sh off before committing" >&2\nexit 1\n' "$tag" > "$hook"
    chmod +x "$hook"
    echo "device_slim: on, $(tracked_bytes) bytes tracked (kept: ${keep:-none})"
    ;;
  off)
    if [ ! -f "$marker" ]; then echo "device_slim: already off"; exit 0; fi
    while IFS= read -r d; do
      [ -n "$d" ] || continue
      grep -vxF "/$d/" "$exclude" > "$exclude.tmp" || true
      mv "$exclude.tmp" "$exclude"
      git reset -q -- "$d"
    done < "$marker"
    rm -f "$marker"
    if [ -f "$hook" ] && grep -qF "$tag" "$hook"; then rm -f "$hook"; fi
    echo "device_slim: off, $(tracked_bytes) bytes tracked"
    ;;
  status)
    state=off; [ -f "$marker" ] && state=on
    echo "device_slim: $state, $(tracked_bytes) bytes tracked (limit 67108864 with the carried paths)"
    ;;
  -h|--help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    ;;
  *)
    echo "device_slim: unknown command '$1' (on, off, status)" >&2; exit 2
    ;;
esac
