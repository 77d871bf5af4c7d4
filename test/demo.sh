#!/bin/bash
# make demo: dump a running program with the pinned CRIU and show what its images hold.
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"

d=$BUILD/demo
rm -rf "$d" && mkdir -p "$d"
trap 'kill_memhogs "$d"' EXIT
echo "== starting memhog (256 MiB of distinct data, a forked child, 2 threads)"
pid=$(start_memhog "$d" -m 256 -f -t 2)
echo "== criu dump -t $pid -D $d/img"
criu_dump "$pid" "$d/img" || { tail -5 "$d/img/dump.log"; exit 1; }
echo "== lazyrestore show $d/img"
"$LAZYRESTORE" show "$d/img"
