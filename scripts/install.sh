#!/bin/bash
# install.sh install|uninstall: what `make install` / `make uninstall` do.
# From make: DESTDIR, BINDIR, MANDIR, CRIU_PLUGIN_DIR, DATADIR, LR_BIN, LRP_SO.
#   BINDIR/lazyrestore, CRIU_PLUGIN_DIR/lazyrestore.so,
#   MANDIR/man1/lazyrestore.1, MANDIR/man7/lazyrestore-plugin.7
# install also writes DATADIR/lazyrestore/install-manifest: every file it
# put and every directory it had to create; uninstall removes exactly those
# (directories only if empty), and the manifest.
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?install or uninstall}
dest=${DESTDIR:-}
manifest=$DATADIR/lazyrestore/install-manifest
# source|target|mode
items=(
	"$LR_BIN|$BINDIR/lazyrestore|755"
	"$LRP_SO|$CRIU_PLUGIN_DIR/lazyrestore.so|755"
	"$TOP/man/lazyrestore.1|$MANDIR/man1/lazyrestore.1|644"
	"$TOP/man/lazyrestore-plugin.7|$MANDIR/man7/lazyrestore-plugin.7|644"
)

declare -A created=()
# make_dir DIR: mkdir -p under DESTDIR, noting each directory it creates.
make_dir() {
	local d=$1 missing=()
	while [ -n "$d" ] && [ "$d" != / ] && [ ! -d "$dest$d" ]; do
		missing+=("$d")
		d=$(dirname "$d")
	done
	mkdir -p "$dest$1"
	for d in "${missing[@]}"; do created[$d]=1; done
}

do_install() {
	local it src dst m d
	if [ -f "$dest$manifest" ]; then # a reinstall keeps the directories the first one created
		while read -r kind path; do [ "$kind" = d ] && created[$path]=1; done <"$dest$manifest"
	fi
	make_dir "$(dirname "$manifest")"
	local out=()
	for it in "${items[@]}"; do
		IFS='|' read -r src dst m <<<"$it"
		[ -f "$src" ] || { echo "install: $src is missing (make first)" >&2; exit 1; }
		make_dir "$(dirname "$dst")"
		install -m "$m" "$src" "$dest$dst"
		echo "  INSTALL  $dest$dst"
		out+=("f $dst")
	done
	for d in "${!created[@]}"; do out+=("d $d"); done
	printf '%s\n' "${out[@]}" >"$dest$manifest"
}

do_uninstall() {
	local it src dst m kind path
	if [ ! -f "$dest$manifest" ]; then
		echo "uninstall: no $dest$manifest: removing only the installed files" >&2
		for it in "${items[@]}"; do
			IFS='|' read -r src dst m <<<"$it"
			rm -fv "$dest$dst"
		done
		return
	fi
	local files=() dirs=()
	while read -r kind path; do
		case $kind in
		f) files+=("$path") ;;
		d) dirs+=("$path") ;;
		esac
	done <"$dest$manifest"
	for path in "${files[@]}"; do rm -fv "$dest$path"; done
	rm -f "$dest$manifest"
	# Directories deepest first, each only if nothing else is in it.
	printf '%s\n' "${dirs[@]}" | awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2- |
		while read -r path; do
			[ -n "$path" ] && rmdir "$dest$path" 2>/dev/null && echo "removed directory '$dest$path'"
			true
		done
}

case $mode in
install) do_install ;;
uninstall) do_uninstall ;;
*) echo "usage: $0 install|uninstall" >&2; exit 2 ;;
esac
