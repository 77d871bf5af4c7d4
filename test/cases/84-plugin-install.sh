#!/bin/bash
# timeout: 300
# make install DESTDIR=tmp puts lazyrestore, the plugin and both man pages
# where they belong; the installed plugin and binary do a lazy restore (the
# plugin given its DESTDIR'd binary by LAZYRESTORE_BIN); make uninstall
# leaves DESTDIR empty.
. "$(dirname "$0")/../lib/plugin.sh"
trap plugin_cleanup EXIT

d=$(scratch plugin-install)
dest=$(mktemp -d -p "$d")
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$TOP" --no-print-directory "$@"; }

if ! mk install DESTDIR="$dest" >"$d/install.out" 2>&1; then
	fail plugin-install "make install failed: $(tail -n3 "$d/install.out")"
	finish
fi
want=(usr/local/bin/lazyrestore usr/lib/criu/lazyrestore.so usr/local/share/man/man1/lazyrestore.1
	usr/local/share/man/man7/lazyrestore-plugin.7)
ok=1
for f in "${want[@]}"; do
	[ -f "$dest/$f" ] || { fail plugin-install "no $f"; ok=0; }
done
[ -x "$dest/usr/local/bin/lazyrestore" ] || { fail plugin-install "lazyrestore is not executable"; ok=0; }
extra=$(cd "$dest" && find . -type f ! -path ./usr/local/share/lazyrestore/install-manifest | sed 's|^\./||' | sort |
	grep -vxF -f <(printf '%s\n' "${want[@]}"))
[ -z "$extra" ] || { fail plugin-install "unexpected files: $extra"; ok=0; }
[ $ok = 1 ] && pass plugin-install

for m in man1/lazyrestore.1 man7/lazyrestore-plugin.7; do
	w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$dest/usr/local/share/man/$m" 2>&1 >/dev/null)
	if [ -z "$w" ]; then pass "plugin-install-man-${m##*/}"; else fail "plugin-install-man-${m##*/}" "$w"; fi
done

# The installed pieces restore lazily.
d2=$d/prog
mkdir -p "$d2"
# shellcheck disable=SC2034 # lazy_cleanup (lazy.sh) kills the programs of LAZY_DIR
LAZY_DIR=$d2
if pid=$(start_memhog "$d2" -m 32 -f) && criu_dump "$pid" "$d2/img"; then
	PLUGIN_LIB=$dest/usr/lib/criu
	export LAZYRESTORE_BIN=$dest/usr/local/bin/lazyrestore
	through_plugin plugin-installed "$d2/img" "$d2" check_memhog
	unset LAZYRESTORE_BIN
else
	fail plugin-installed "memhog did not start or dump: $(first_err "$d2/img/dump.log")"
fi

if ! mk uninstall DESTDIR="$dest" >"$d/uninstall.out" 2>&1; then
	fail plugin-uninstall "make uninstall failed: $(tail -n3 "$d/uninstall.out")"
elif [ -z "$(find "$dest" -mindepth 1)" ]; then
	pass plugin-uninstall
else
	fail plugin-uninstall "left behind: $(find "$dest" -mindepth 1 | head -n5 | tr '\n' ' ')"
fi
rmdir "$dest" 2>/dev/null
finish
