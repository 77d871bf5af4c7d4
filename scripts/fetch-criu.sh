#!/bin/bash
# Fetch CRIU 4.1.1's upstream tarball through Debian's source package.
# Usage: fetch-criu.sh OUTDIR  -> OUTDIR/criu_4.1.1.orig.tar.xz (sha256-checked)
#
# A private apt configuration under OUTDIR/apt holds one deb-src entry for
# trixie, at the archive the machine's own sources already use; the system's
# apt configuration is never touched.
set -euo pipefail

VERSION=4.1.1
DEBVER=4.1.1-1
SHA256=f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe
OUT=${1:?usage: fetch-criu.sh OUTDIR}
TARBALL=$OUT/criu_$VERSION.orig.tar.xz

have_good_tarball() {
	[ -f "$TARBALL" ] && echo "$SHA256  $TARBALL" | sha256sum -c --status
}

have_good_tarball && exit 0
mkdir -p "$OUT"

# The first URI of a Debian main archive entry (deb822 or one-line format).
archive_uri() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; break } }' "$f"
	done
}
URI=$(archive_uri | grep -v -e security -e updates | grep '/debian/\?$' | head -n 1 || true)
if [ -z "$URI" ]; then
	echo "fetch-criu: no Debian archive entry found in /etc/apt/sources.list.d or sources.list" >&2
	exit 1
fi

APT=$(realpath "$OUT")/apt
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/etc/preferences.d"
cat >"$APT/etc/sources.list" <<SRC
deb-src [signed-by=/usr/share/keyrings/debian-archive-trixie-automatic.gpg] $URI trixie main
SRC
touch "$APT/status"
aptopts=(
	-o "Dir::Etc::SourceList=$APT/etc/sources.list"
	-o "Dir::Etc::SourceParts=-"
	-o "Dir::Etc::Preferences=-"
	-o "Dir::Etc::PreferencesParts=$APT/etc/preferences.d"
	-o "Dir::State::Lists=$APT/lists"
	-o "Dir::State::status=$APT/status"
	-o "Dir::Cache=$APT/cache"
	-o "APT::Sandbox::User=root"
	-o "Debug::NoLocking=1"
)
echo "fetch-criu: fetching criu $DEBVER source through a private apt configuration"
apt-get "${aptopts[@]}" -q update >"$APT/update.log" 2>&1 || {
	echo "fetch-criu: apt-get update (private config) failed, see $APT/update.log" >&2
	tail -3 "$APT/update.log" >&2
	exit 1
}
# Only the .orig.tar.xz may be served; the .dsc and .debian.tar.xz can 404,
# so apt's exit status alone does not decide: the tarball's hash does.
(cd "$OUT" && apt-get "${aptopts[@]}" -q source --download-only "criu=$DEBVER") >"$APT/source.log" 2>&1 || true
if ! [ -f "$TARBALL" ]; then
	echo "fetch-criu: $TARBALL did not arrive, see $APT/source.log" >&2
	tail -3 "$APT/source.log" >&2
	exit 1
fi
if ! have_good_tarball; then
	echo "fetch-criu: $TARBALL has sha256 $(sha256sum "$TARBALL" | cut -d' ' -f1), want $SHA256" >&2
	exit 1
fi
echo "fetch-criu: $TARBALL verified"
