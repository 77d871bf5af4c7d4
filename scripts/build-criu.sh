#!/bin/bash
# Unpack CRIU's tarball, apply criu-patches/series and build the tree, unless
# the tree in place was built from exactly this tarball and these patches.
#   build-criu.sh TARBALL PATCHDIR SRCDIR BINDIR JOBS
# A lock makes concurrent makes wait for one another instead of racing in SRCDIR.
set -euo pipefail
tarball=$1 patches=$2 src=$3 bin=$4 jobs=$5
build=$(dirname "$src")
log=$build/criu-build.log

mkdir -p "$build"
exec 9>"$build/.criu.lock"
flock 9

series=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$patches/series")
# Names and contents, not paths: a checkout moved or cloned elsewhere reuses its built tree.
want=$( (sha256sum <"$tarball" | cut -d" " -f1; for p in $series; do echo "$p $(sha256sum <"$patches/$p" | cut -d" " -f1)"; done) | sha256sum | cut -d" " -f1)
# build/criu/ points into this tree: made anew every time, so a copied build dir points at its own tree.
link_bins() {
	mkdir -p "$bin"
	ln -sfn "$src/criu/criu" "$bin/criu"
	printf '#!/bin/sh\nPYTHONPATH=%s/lib:%s/crit exec /usr/bin/python3 -m crit "$@"\n' "$src" "$src" >"$bin/crit"
	chmod +x "$bin/crit"
}
if [ -f "$src/.built" ] && [ "$(cat "$src/.built")" = "$want" ] && [ -x "$src/criu/criu" ]; then
	link_bins
	exit 0
fi

echo "  CRIU     unpack $(basename "$tarball"), apply criu-patches/series ($(echo "$series" | wc -w) patches)"
rm -rf "$src" && mkdir -p "$src"
tar -C "$src" --strip-components=1 -xf "$tarball"
for p in $series; do
	echo "  PATCH    $p"
	patch -d "$src" -p1 -s --no-backup-if-mismatch <"$patches/$p" || {
		echo "build-criu: $p does not apply to CRIU's tree" >&2
		exit 1
	}
done
echo "  CRIU     build criu, lib, crit, zdtm (log: $log)"
if ! { make -C "$src" -j"$jobs" criu lib crit && make -C "$src/test/zdtm" -j"$jobs"; } >"$log" 2>&1; then
	tail -20 "$log"
	echo "build-criu: CRIU build failed, see $log" >&2
	exit 1
fi
link_bins
echo "$want" >"$src/.built"
