#!/bin/bash
# timeout: 300
# `criu dump --lazy-pages` as the source, with criu-patches/0007 and without
# CAP_SYS_RESOURCE: its tee pipe stays within fs.pipe-max-size, --address
# binds only that address, and (1) our client fetches every lazy page from
# it, (2) stock `criu lazy-pages --page-server` restores the tree from it
# (in a new pid namespace: the dumped tree still holds its pids until every
# page is served) and every word verifies.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/net.sh"

d=$(scratch net-lazy-dump)
at_exit 'kill_memhogs "$d/ours"; kill_memhogs "$d/stock"'

# 1. our client
mkdir -p "$d/ours"
if lazy_dump "$d/ours" 48; then
	bound=$(ss -Hltn "sport = :$P" | awk '{print $4}')
	[ "$bound" = "127.0.0.1:$P" ] && pass net-lazy-dump-address || fail net-lazy-dump-address "listening on '$bound'"
	out=$(run_bounded 60 "page-fetch from criu dump --lazy-pages" /dev/null \
		"$LAZYRESTORE" page-fetch -D "$d/ours/img" --port "$P" --lazy-dump --chunk 64 2>&1)
	rc=$?
	echo "    $out"
	if [ $rc -eq 0 ] && lazy_dump_ok "$d/ours"; then
		pass net-lazy-dump-our-client
	else
		fail net-lazy-dump-our-client "fetch $rc: $out; dump: $(grep -m1 'Error (criu/page' "$d/ours/img/dump.log")"
	fi
	kill_memhogs "$d/ours"
else
	fail net-lazy-dump-our-client "criu dump --lazy-pages did not listen: $(grep -m1 Error "$d/ours/img/dump.log")"
fi

# 2. stock criu lazy-pages restores from it, in a pid namespace of its own
mkdir -p "$d/stock"
if lazy_dump "$d/stock" 48; then
	res=$(ns_restore stock "$d/stock" "$pid" "$CRIU" lazy-pages -D "$d/stock/img" --page-server \
		--address 127.0.0.1 --port "$P" -o lazy-stock.log -v4)
	echo "$res" | sed 's/^/    /'
	if [[ $res == OK* ]] && [[ $res == *"lazy-pages exit 0"* ]] && lazy_dump_ok "$d/stock"; then
		pass net-lazy-dump-stock-client
	else
		fail net-lazy-dump-stock-client "$(echo "$res" | tr '\n' ' '); $(grep -m1 -h 'Error (criu/[pu]' "$d/stock/img/"*.log)"
	fi
	kill_memhogs "$d/stock"
else
	fail net-lazy-dump-stock-client "criu dump --lazy-pages did not listen"
fi
finish
