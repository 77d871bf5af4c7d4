#!/bin/bash
# gen-regressions.sh OUTDIR: regression inputs too big to commit, made on
# the fly into OUTDIR/<target>/ (crit encodes the images, fuzz-pack frames
# them).  test/cases/60-fuzz.sh replays them with the committed ones.
#   fuzz_images/pstree-100k-tasks: 100000 tasks.  The pstree checks were
#   n^2 (images/pstree.c before d1d82bf): minutes of CPU for this input,
#   hours for IMG_MAX_TASKS; libFuzzer's -timeout catches a relapse.
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
CRIT=$TOP/build/criu/crit
PACK=$TOP/build/fuzz/fuzz-pack
out=$1
d=$out/work/pstree-100k-tasks
rm -rf "$d" && mkdir -p "$d/img" "$out/fuzz_images"
/usr/bin/python3 - "$d" <<'PY'
import json, sys
d = sys.argv[1]
json.dump({"magic": "INVENTORY", "entries": [{"img_version": 2, "fdinfo_per_id": True}]},
          open(d + "/inventory.json", "w"))
tasks = [{"pid": i + 1, "ppid": 0 if i == 0 else 1, "pgid": 1, "sid": 1} for i in range(100000)]
json.dump({"magic": "PSTREE", "entries": tasks}, open(d + "/pstree.json", "w"))
PY
"$CRIT" encode -i "$d/inventory.json" -o "$d/img/inventory.img"
"$CRIT" encode -i "$d/pstree.json" -o "$d/img/pstree.img"
"$PACK" "$d/img" >"$out/fuzz_images/pstree-100k-tasks"
