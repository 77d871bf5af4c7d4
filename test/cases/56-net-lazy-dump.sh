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
trap 'kill_memhogs "$d"' EXIT

# lazy_dump NAME: memhog dumped with --lazy-pages on a free loopback port; sets $pid, $P
lazy_dump() {
	pid=$(start_memhog "$d/$1" -m 48 -t 1) || return 1
	P=$(free_port)
	mkdir -p "$d/$1/img"
	"$CRIU" dump -t "$pid" -D "$d/$1/img" --lazy-pages --address 127.0.0.1 --port "$P" -o dump.log -v4 &
	dpid=$!
	local n=100
	until ss -Hltn "sport = :$P" | grep -q LISTEN; do
		n=$((n - 1))
		[ $n -gt 0 ] && kill -0 "$dpid" 2>/dev/null || return 1
		sleep 0.2
	done
}

dump_ok() { # NAME
	wait "$dpid" && grep -q "Lazy pages transfer finished successfully" "$d/$1/img/dump.log"
}

# 1. our client
mkdir -p "$d/ours"
if lazy_dump ours; then
	bound=$(ss -Hltn "sport = :$P" | awk '{print $4}')
	[ "$bound" = "127.0.0.1:$P" ] && pass net-lazy-dump-address || fail net-lazy-dump-address "listening on '$bound'"
	out=$("$LAZYRESTORE" page-fetch -D "$d/ours/img" --port "$P" --lazy-dump --chunk 64 2>&1)
	rc=$?
	echo "    $out"
	if [ $rc -eq 0 ] && dump_ok ours; then
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
if lazy_dump stock; then
	cat >"$d/stock/inns.sh" <<INNS
#!/bin/bash
cd "$d/stock/img" || exit 1
"$CRIU" lazy-pages -D "$d/stock/img" --page-server --address 127.0.0.1 --port $P -o lazy.log -v4 &
lp=\$!
sleep 1
"$CRIU" restore -D "$d/stock/img" --lazy-pages -d -o restore.log -v4 || { echo "restore failed"; exit 1; }
rm -f "$d/stock/result.$pid"
kill -USR1 $pid
for i in \$(seq 600); do [ -e "$d/stock/result.$pid" ] && break; sleep 0.1; done
cat "$d/stock/result.$pid"
wait \$lp || echo "lazy-pages failed"
kill -9 $pid
INNS
	chmod +x "$d/stock/inns.sh"
	res=$(timeout 150 unshare -pf --mount-proc "$d/stock/inns.sh" 2>&1)
	echo "    $res"
	if [[ $res == OK* ]] && dump_ok stock; then
		pass net-lazy-dump-stock-client
	else
		fail net-lazy-dump-stock-client "$res; $(grep -m1 -h 'Error (criu/[pu]' "$d/stock/img/"*.log)"
	fi
	kill_memhogs "$d/stock"
else
	fail net-lazy-dump-stock-client "criu dump --lazy-pages did not listen"
fi
finish
