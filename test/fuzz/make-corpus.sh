#!/bin/bash
# make-corpus.sh: dump small programs with the pinned criu and pack each dump
# into a seed input of test/fuzz/corpus/fuzz_images/ (framing: frame.h).
# Pages files go in by size only, so the seeds stay a few KiB each.
# The fuzz_handoff and fuzz_pageserver seeds are written out directly: a few
# honest hand-offs, a few page-server sessions (--hand-made-only: just those;
# --handoff-only is its old name).
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

# pageserver_seeds: a small dump, then requests (framing in fuzz_pageserver.c): held pages,
# answers cut at an entry's end or at PS_MAX_REPLY_PAGES, pages not held, CLOSE, bad requests
pageserver_seeds() {
	mkdir -p "$TOP/test/fuzz/corpus/fuzz_pageserver"
	/usr/bin/python3 - "$TOP/test/fuzz/corpus/fuzz_pageserver" <<'PY'
import struct, sys
out = sys.argv[1]
PAGE = 4096
PRESENT, LAZY_PRESENT, LAZY, PARENT = 0, 1, 2, 3  # the flags byte's common values
GET, CLOSE, FORCE_CLOSE, ADD_F = 7, 0x1023, 0x1024, 6
def task(pid, entries, base, tail=0, cut=0):
    b = struct.pack("<IBBIQ", pid, len(entries), tail, cut, base)
    for gap, pages, flags in entries:
        b += struct.pack("<HHB", gap, pages | 0x8000 if pages > 0x3f else pages, flags)
    return b
def dump(*tasks):
    return bytes([len(tasks) - 1]) + b"".join(tasks)
def req(cmd, pid, vaddr, pages):  # struct ps_iov; "<" is x86_64's host order
    return struct.pack("<IIQQ", cmd, pages, vaddr, pid)
A, B = 0x7f0000000000, 0x400000
two = dump(task(100, [(0, 4, PRESENT), (0, 2, LAZY_PRESENT), (2, 3, LAZY), (0, 1100, PRESENT)], A),
           task(200, [(0, 8, PRESENT), (1, 1, PARENT)], B))
big = A + (4 + 2 + 2 + 3) * PAGE  # the 1100-page entry
def seed(name, d, reqs):
    open(out + "/" + name, "wb").write(d + b"".join(reqs))
seed("get-held", two, [req(GET, 100, A, 1), req(GET, 200, B + 3 * PAGE, 2), req(GET, 100, A + 4 * PAGE, 2),
                       req(CLOSE, 0, 0, 0)])
seed("get-past-entry", two, [req(GET, 100, A + 2 * PAGE, 8), req(GET, 100, big, 2000),
                             req(GET, 100, big + 75 * PAGE, 1025),  # 1025 left: one past the cap
                             req(GET, 200, B + 7 * PAGE, 4), req(CLOSE, 0, 0, 0)])
seed("get-unheld", two, [req(GET, 100, A + 8 * PAGE, 1), req(GET, 300, A, 1), req(GET, 200, B + 9 * PAGE, 1),
                         req(GET, 100, A + 6 * PAGE, 1), req(GET, 100, 0, 1)])
seed("close", two, [req(CLOSE, 0, 0, 0), req(FORCE_CLOSE, 0, 0, 0), req(CLOSE | 1 << 16, 0, 0, 0)])
seed("bad-command", two, [req(0x12345, 100, A, 1), req(GET | 4 << 16, 100, A, 1), req(GET, 100, A, 0),
                          req(GET, 100, A + 1, 1), req(GET, 0, A, 1), req(GET, 1 << 32, A, 1),
                          req(GET, 100, A, (1 << 20) + 1), req(ADD_F, 100, A, 1)])
# the pages file cut to 5 pages and 100 bytes: page 5 only partly mapped
seed("truncated-pages", dump(task(100, [(0, 4, PRESENT), (0, 4, PRESENT)], A, 0x80 | 1, 5 * PAGE + 100)),
     [req(GET, 100, A, 4), req(GET, 100, A + 4 * PAGE, 4), req(GET, 100, A + 5 * PAGE, 1),
      req(GET, 100, A + 7 * PAGE, 1)])
# no present page: nothing is mapped; and a dump the reader rejects (PE_PARENT mixed with PE_LAZY)
seed("nothing-mapped", dump(task(100, [(0, 4, LAZY), (0, 2, PARENT)], A)), [req(GET, 100, A, 1)])
seed("dump-rejected", dump(task(100, [(0, 4, 0x80 | 3)], A)), [req(GET, 100, A, 1)])
PY
}

handoff_seeds && pageserver_seeds || exit 1
case ${1:-} in --hand-made-only | --handoff-only) exit 0 ;; esac
dump memhog-1m -m 1 &&
	dump memhog-fork-thread -m 1 -f -t 1 &&
	parent memhog-parent memhog-1m &&
	v1 memhog-v1 memhog-1m || exit 1
du -b "$OUT"/* "$TOP"/test/fuzz/corpus/fuzz_{handoff,pageserver}/*
