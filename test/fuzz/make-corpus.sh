#!/bin/bash
# make-corpus.sh: dump small programs with the pinned criu and pack each dump
# into a seed input of test/fuzz/corpus/fuzz_images/ (framing: frame.h).
# Pages files go in by size only, so the seeds stay a few KiB each.
# The fuzz_handoff seeds are written out directly: a few honest hand-offs
# (--handoff-only: just those).
# Run after `make`; commit the result.
. "$(dirname "$0")/../lib/common.sh"
set -u
PACK=$BUILD/fuzz/fuzz-pack
OUT=$TOP/test/fuzz/corpus/fuzz_images
name=
work=$(scratch fuzz-corpus) || exit 1
trap 'kill_memhogs "$work/$name"' EXIT
if [ ! -x "$PACK" ] || [ ! -x "$CRIU" ]; then echo "run make first" >&2; exit 1; fi
mkdir -p "$OUT"

# dump NAME MEMHOG-ARGS...: one memhog dump packed as OUT/NAME
dump() {
	name=$1
	shift
	local d=$work/$name pid
	mkdir -p "$d/img"
	pid=$(start_memhog "$d" "$@") || return 1
	criu_dump "$pid" "$d/img" || { echo "criu dump failed, see $d/img/dump.log" >&2; return 1; }
	"$PACK" "$d/img" >"$OUT/$name"
}

# parent NAME FROM: FROM's dump with every other pagemap entry turned into
# PE_PARENT (pre-dump, which makes those for real, needs soft-dirty tracking).
parent() {
	local d=$work/$1 f
	cp -a "$work/$2" "$d" || return 1
	for f in "$d"/img/pagemap-*.img; do
		"$BUILD/criu/crit" decode -i "$f" -o "$d/pm.json" &&
			/usr/bin/python3 - "$d/pm.json" <<'PY' &&
import json, sys
img = json.load(open(sys.argv[1]))
for e in img["entries"][1::2]:
    e["flags"] = 1  # PE_PARENT
json.dump(img, open(sys.argv[1], "w"))
PY
			"$BUILD/criu/crit" encode -i "$d/pm.json" -o "$f" || return 1
	done
	"$PACK" "$d/img" >"$OUT/$1"
}

# v1 NAME FROM: FROM's dump as img_version 1 writes it: no common magic.
v1() {
	local d=$work/$1 f
	cp -a "$work/$2" "$d" || return 1
	"$BUILD/criu/crit" decode -i "$d/img/inventory.img" -o "$d/inv.json" &&
		/usr/bin/python3 - "$d/inv.json" <<'PY' &&
import json, sys
img = json.load(open(sys.argv[1]))
img["entries"][0]["img_version"] = 1
json.dump(img, open(sys.argv[1], "w"))
PY
		"$BUILD/criu/crit" encode -i "$d/inv.json" -o "$d/img/inventory.img" || return 1
	for f in "$d"/img/{pstree,core-*,mm-*,pagemap-*}.img; do
		tail -c +5 "$f" >"$f.v1" && mv "$f.v1" "$f" || return 1
	done
	"$PACK" "$d/img" >"$OUT/$1"
}

# handoff_seeds: what criu restore sends on lazy-pages.socket (framing in fuzz_handoff.c)
handoff_seeds() {
	mkdir -p "$TOP/test/fuzz/corpus/fuzz_handoff"
	/usr/bin/python3 - "$TOP/test/fuzz/corpus/fuzz_handoff" <<'PY'
import struct, sys
out = sys.argv[1]
def seed(name, alive, zombies, steps):
    b = bytes([len(alive), len(zombies)]) + b"".join(struct.pack("<I", p) for p in alive + zombies)
    open(out + "/" + name, "wb").write(b + b"".join(steps))
pid = lambda p: b"\x02" + struct.pack("<i", p)
uffd = lambda n=1: bytes([1 | n << 2])
pipe = bytes([1 | 1 << 2 | 0x20])
end = b"\x03"
seed("one-task", [100], [], [pid(100), uffd(), end])
seed("tree-with-zombie", [100, 101, 102], [103], [pid(100), uffd(), pid(101), uffd(), pid(-103), pid(102), uffd(), end])
seed("pipe-not-uffd", [100], [], [pid(100), pipe, end])
seed("two-fds", [100], [], [pid(100), uffd(2), end])
seed("no-end-marker", [100], [], [pid(100), uffd()])
PY
}

handoff_seeds || exit 1
[ "${1:-}" = --handoff-only ] && exit 0
dump memhog-1m -m 1 &&
	dump memhog-fork-thread -m 1 -f -t 1 &&
	parent memhog-parent memhog-1m &&
	v1 memhog-v1 memhog-1m || exit 1
du -b "$OUT"/* "$TOP"/test/fuzz/corpus/fuzz_handoff/*
