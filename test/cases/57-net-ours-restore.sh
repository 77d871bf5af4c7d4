#!/bin/bash
# timeout: 400
# Our `lazyrestore lazy-pages --page-server` as the client of a real remote
# lazy restore: the interop matrix {our page server, stock `criu dump
# --lazy-pages`} x {stock `criu lazy-pages --page-server`, ours} x {plain,
# TLS}, every restored word checked by the memhogs.  Cells elsewhere: our
# server to stock plain (50), to stock over TLS (55), the lazy dump to stock
# plain (56).  Here: our server to ours (plain, --wire 4.2, TLS), the lazy
# dump to ours (plain, TLS) and to stock over TLS.  Against our server the
# restore reads a copy of the dump whose lazy pages are overwritten
# (scribble_lazy): it is right only if every lazy page came over the network.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/lazy.sh"
. "$TOP/test/lib/net.sh"

d=$(scratch net-ours-restore)
at_exit 'kill_memhogs "$d"; for x in "$d"/dump-*; do kill_memhogs "$x"; done'
make_certs "$d" || { fail net-ours-setup "openssl: $(tail -n2 "$d/pki/openssl.log")"; finish; }
read -r -a peer <<<"$(tls_args "$d" peer)"
pid=$(start_memhog "$d" -m 32 -f -t 1) && criu_dump "$pid" "$d/img" || { fail net-ours-setup "cannot dump memhog"; finish; }
scribble_lazy "$d/img" "$d/dst" || { fail net-ours-setup "cannot make the destination copy"; finish; }

# our page server of $d/img -> our lazy-pages restoring $d/dst; NAME SERVER-ARGS -- CLIENT-ARGS
from_our_server() {
	local name=$1 sargs=() cargs=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do sargs+=("$1") && shift; done
	shift
	cargs=("$@")
	wait_tree_gone "$d/img" || { fail "$name" "dumped pids still in use"; return; }
	start_ps "$d" "$name" --sessions 2 "${sargs[@]}" || { fail "$name" "page server did not start"; return; }
	if lazy_restore "$name" "$LAZYRESTORE" "$d/dst" --page-server --address 127.0.0.1 --port "$port" "${cargs[@]}"; then
		check_memhog "$name" "$d"
		daemon_ok "$name" "$d/dst"
		grep -q "second connection for urgent requests" "$d/dst/lazy-pages-$name.log" &&
			pass "$name-urgent-channel" || fail "$name-urgent-channel" "no second connection in the log"
	fi
	kill_memhogs "$d"
	ps_exit && pass "$name-server-exit" || fail "$name-server-exit" "$(grep -m1 Error "$d/ps-$name.log")"
}

from_our_server net-ours-plain --
from_our_server net-ours-wire42 --wire 4.2 -- --wire 4.2
from_our_server net-ours-tls "${peer[@]}" --address 127.0.0.1 -- "${peer[@]}"
grep -q "TLS handshake done, certificate verified" "$d/ps-net-ours-tls.log" && pass net-ours-tls-verified ||
	fail net-ours-tls-verified "no verified handshake in the server's log"

# `criu dump --lazy-pages` -> CLIENT in a pid namespace; NAME ours|stock [TLS-ARGS...]
from_lazy_dump() {
	local name=$1 who=$2 x=$d/dump-$1 res
	shift 2
	mkdir -p "$x"
	lazy_dump "$x" 48 "$@" || { fail "$name" "criu dump --lazy-pages did not listen: $(first_err "$x/img/dump.log")"; return; }
	local cmd=("$LAZYRESTORE" lazy-pages -D "$x/img" --page-server --address 127.0.0.1 --port "$P" "$@"
		-o "lazy-$name.log" -v4 --stats "stats-$name.json")
	[ "$who" = stock ] && cmd=("$CRIU" lazy-pages -D "$x/img" --page-server --address 127.0.0.1 --port "$P" "$@"
		-o "lazy-$name.log" -v4)
	res=$(ns_restore "$name" "$x" "$pid" "${cmd[@]}")
	echo "$res" | sed 's/^/    /'
	if [[ $res == OK* ]] && [[ $res == *"lazy-pages exit 0"* ]] && lazy_dump_ok "$x"; then
		pass "$name"
	else
		fail "$name" "$(echo "$res" | tr '\n' ' '); $(first_err "$x/img/lazy-$name.log"); dump: $(grep -m1 Error "$x/img/dump.log")"
	fi
	if [ "$who" = ours ]; then
		grep -q "the server takes one connection" "$x/img/lazy-$name.log" && pass "$name-one-connection" ||
			fail "$name-one-connection" "the client did not find that criu serves one connection"
	fi
	kill_memhogs "$x"
}

from_lazy_dump net-lazy-dump-ours ours
from_lazy_dump net-lazy-dump-ours-tls ours "${peer[@]}"
from_lazy_dump net-lazy-dump-stock-tls stock "${peer[@]}"
finish
