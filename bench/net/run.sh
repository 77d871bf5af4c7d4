#!/bin/bash
# Remote lazy restore benchmark: our `lazyrestore lazy-pages --page-server`
# against stock `criu lazy-pages --page-server`, both fetching from the same
# `lazyrestore page-server` of the same dump, in the same run, alternating
# order, over loopback and over an emulated link (bench/net/delayline: this
# kernel has no sch_netem); on loopback also both from `criu dump --lazy-pages`.
#   run.sh [--rows "SIZE@LINK[@SOURCE] ..."] [--full] [--sizes "MIB ..."] [--reps 3]
#          [--touches 1000] [--queue fair|fifo] [--source images|dump|both]
# LINK is `lo` (loopback) or RTT_MS/RATE[/QUEUE], e.g. 10/1g/fifo: the page
# server in one network namespace, the lazy-pages client in another, the
# emulator's TUN pair between them (10.199.0.1 and .2), RATE in bit/s (1g,
# 10g), QUEUE the link's queue (default --queue, fair).  criu restore and the
# restored program stay where the bench runs (the client talks to criu over
# a unix socket in the image directory); only the page traffic crosses the
# link.  SOURCE is where the pages come from: `images` (default), our page
# server of the dump's images; or `dump` (loopback only), stock's own source
# end to end: per restore a fresh bench/touch dumped by `criu dump --lazy-pages`
# on a loopback port (the tree frozen, one connection), each client restoring
# it in a pid namespace of its own (the frozen tree keeps its pids); the dump's
# own time is not measured.  --source sets the loopback rows' SOURCE where the
# row names none (both: a row of each).  Default rows (7-12 minutes, most of it
# stock at 10 ms): loopback 256 MiB and 1 GiB from each source; 256 MiB at RTT
# 0, 1 and 10 ms x 1 Gbit/s and 0, 1 ms x 10 Gbit/s; 1 GiB at 10 ms x 10
# Gbit/s (the 12.5 MB bandwidth-delay product).
# --full: both sizes on every link; --sizes: loopback rows of these sizes only.
# --clients "ours oursb" with OURS_B=BINARY: an interleaved A/B of two builds.
# Each link is first measured through the emulator itself (TCP ping-pong RTT
# idle and during a stream, a plain TCP stream's rate): a link short of its
# set rate is marked in the table.
# The restored program (bench/restore's touch, "busy") touches TOUCHES random
# pages at once, beside the background stream, then checks every word; a
# mismatch aborts the bench.  Per row and client: the median (min-max) over
# the repetitions of
#   restore   time for `criu restore --lazy-pages -d` to return
#   resident  time from restore start until the client exits (all resident)
#   fault p50/p99  latency of the touches that faulted, during the stream
set -euo pipefail
here=$(dirname "$0")
# what the caller left open closed (`flock LOCK run.sh`'s lock: criu dumps no program
# that inherited a file lock); bash's own descriptors are close-on-exec
for f in /proc/$$/fd/*; do
	n=${f##*/}
	fl=$(awk '/^flags:/ { print $2 }' "/proc/$$/fdinfo/$n" 2>/dev/null) || continue
	if [ -n "$fl" ] && [ "$n" -gt 2 ] && ((!(8#$fl & 8#2000000))); then eval "exec $n>&-"; fi
done
. "$here/../../test/lib/common.sh"
. "$here/../../test/lib/net.sh"

rows="256@lo 256@lo@dump 1024@lo 1024@lo@dump 256@0/1g 256@1/1g 256@10/1g 256@0/10g 256@1/10g 1024@10/10g"
reps=3 touches=1000 queue=fair clients="stock ours" source=
while [ $# -gt 0 ]; do
	case $1 in
	--rows) rows=$2; shift 2 ;;
	--full) rows=$(for s in 256 1024; do for l in lo 0/1g 1/1g 10/1g 0/10g 1/10g 10/10g; do echo -n "$s@$l "; done; done); shift ;;
	--sizes) rows=$(for s in $2; do echo -n "$s@lo "; done); shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--touches) touches=$2; shift 2 ;;
	--queue) queue=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;; # "ours" alone, or "ours oursb" (OURS_B=binary) for an A/B
	--source) source=$2; shift 2 ;;
	*) echo "usage: run.sh [--rows \"SIZE@LINK[@SOURCE]...\"] [--full] [--sizes \"MIB...\"] [--reps N] [--touches N] [--queue fair|fifo] [--source images|dump|both]" >&2; exit 2 ;;
	esac
done
# every row as SIZE@LINK@SOURCE
all=
for r in $rows; do
	IFS=@ read -r r_size r_link r_src <<<"$r"
	if [ -z "$r_src" ] && [ "$r_link" = lo ]; then r_src=${source:-images}; fi
	case ${r_src:-images}@$r_link in
	both@lo) all+="$r_size@lo@images $r_size@lo@dump " ;;
	images@* | dump@lo) all+="$r_size@$r_link@${r_src:-images} " ;;
	*) echo "bench: row $r: SOURCE is images, or dump or both (loopback only)" >&2; exit 2 ;;
	esac
done
rows=$all
DELAYLINE=$BUILD/bench/delayline
LINKPROBE=$BUILD/bench/linkprobe
out=$BUILD/bench/net
mkdir -p "$out"
raw=$out/raw.tsv
links=$out/links.tsv
printf 'link\tsize_mib\tprogram\tdaemon\trep\trestore_s\tresident_s\tp50_us\tp99_us\tfault_p50_us\tfault_p99_us\tfaults\tsource\n' >"$raw"
printf 'link\trtt_p50_us\trtt_p99_us\tstream_mbit_s\tloaded_rtt_p50_us\tloaded_rtt_p99_us\tloaded_mbit_s\n' >"$links"
host_noise "before the runs"
nsa=lrnetA$$ nsb=lrnetB$$ dev=lrd0 addr_a=10.199.0.1 addr_b=10.199.0.2

now() { date +%s.%N; }

stop_pid() { # stop_pid PID: TERM, wait, then KILL
	local p=$1
	kill -TERM "$p" 2>/dev/null || return 0
	for _ in $(seq 40); do [ -e "/proc/$p" ] || return 0; sleep 0.05; done
	kill -KILL "$p" 2>/dev/null || true
}

cleanup() {
	local p
	for p in ${pid:-} ${prog:-} ${lpid:-} ${dpid:-} ${spid:-} ${ppid_:-} ${nsinit:-}; do kill -KILL "$p" 2>/dev/null || true; done
	[ -n "${nsholder:-}" ] && wait "$nsholder" 2>/dev/null
	[ -n "${dlpid:-}" ] && stop_pid "$dlpid"
	ip netns del "$nsa" 2>/dev/null || true
	ip netns del "$nsb" 2>/dev/null || true
	if [ -n "${w:-}" ]; then rm -rf "$w"; fi
}
at_exit cleanup
trap 'echo "bench: line $LINENO failed: $BASH_COMMAND" >&2' ERR

# ---- the emulated link ------------------------------------------------------

netns_up() {
	[ -e "/run/netns/$nsa" ] && return 0
	ip netns add "$nsa"
	ip netns add "$nsb"
	local ns
	for ns in "$nsa" "$nsb"; do
		ip -n "$ns" link set lo up
		# a host tuned for the 10 ms x 10 Gbit/s product (12.5 MB), for both clients alike
		ip netns exec "$ns" sysctl -qw net.ipv4.tcp_rmem="4096 131072 33554432" \
			net.ipv4.tcp_wmem="4096 16384 33554432"
	done
}

# link_up RTT_MS RATE QUEUE: the emulator between the namespaces
link_up() {
	local rtt=$1 rate=$2 q=$3 mtu
	netns_up
	# a packet holds the link ~50-130 us: the urgent flow's wait behind one, the packet rate sane
	case $rate in 1g) mtu=16000 ;; *) mtu=65000 ;; esac
	rm -f "$out/delayline.out"
	"$DELAYLINE" --ns-a "$nsa" --ns-b "$nsb" --dev "$dev" --delay-us $((rtt * 500)) --rate "$rate" --queue "$q" \
		--mtu "$mtu" >"$out/delayline.out" 2>"$out/delayline.err" &
	dlpid=$!
	wait_for_file "$out/delayline.out" 10 || true
	for _ in $(seq 100); do grep -q ready "$out/delayline.out" && break; sleep 0.05; done
	grep -q ready "$out/delayline.out" || { echo "bench: delayline did not start: $(cat "$out/delayline.err")" >&2; exit 1; }
	ip -n "$nsa" addr add "$addr_a" peer "$addr_b" dev "$dev"
	ip -n "$nsb" addr add "$addr_b" peer "$addr_a" dev "$dev"
	ip -n "$nsa" link set "$dev" mtu "$mtu" up
	ip -n "$nsb" link set "$dev" mtu "$mtu" up
}

link_down() {
	[ -n "${dlpid:-}" ] || return 0
	stop_pid "$dlpid"
	wait "$dlpid" 2>/dev/null || true
	dlpid=
	sed 's/^/    /' "$out/delayline.err"
}

# link_check KEY RTT_MS: the emulator's own figures, once per link
link_check() {
	local key=$1 rtt=$2 idle stream loaded n=100
	grep -q "^$key	" "$links" && return 0
	ip netns exec "$nsa" "$LINKPROBE" -s "$addr_a" 5201 &
	ppid_=$!
	sleep 0.2
	if [ "$rtt" -ge 10 ]; then n=60; fi
	idle=$(ip netns exec "$nsb" "$LINKPROBE" "$addr_a" 5201 ping $n)
	stream=$(ip netns exec "$nsb" "$LINKPROBE" "$addr_a" 5201 stream 2)
	loaded=$(ip netns exec "$nsb" "$LINKPROBE" "$addr_a" 5201 loaded $n 2 | tr '\n' ' ')
	kill -KILL "$ppid_" 2>/dev/null || true
	wait "$ppid_" 2>/dev/null || true
	ppid_=
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$key" "$(echo "$idle" | awk '{print $2}')" "$(echo "$idle" | awk '{print $4}')" \
		"$(echo "$stream" | awk '{print $2}')" "$(echo "$loaded" | awk '{print $2}')" \
		"$(echo "$loaded" | awk '{print $4}')" "$(echo "$loaded" | awk '{print $6}')" >>"$links"
	tail -n1 "$links" | awk -F'\t' '{ printf "  link %s: tcp rtt p50 %.0f p99 %.0f us, stream %s Mbit/s; during a stream: rtt p50 %.0f p99 %.0f us (%s Mbit/s)\n", $1, $2, $3, $4, $5, $6, $7 }'
}

# ---- one restore ------------------------------------------------------------

# src_up SIZE: stock's own source for one restore: a fresh bench/touch of SIZE MiB ($prog),
# dumped to $w/lz/img by `criu dump --lazy-pages` listening on 127.0.0.1:$port ($dpid), and
# a pid namespace for its restore (its init $nsinit; `unshare` $nsholder): the frozen tree
# keeps its pids until every page is served
src_up() {
	rm -rf "$w/lz" "$w"/ready.*
	prog=$(setsid "$BUILD/bench/touch" -d "$w" -m "$1" -n "$touches" </dev/null >/dev/null 2>&1 & echo $!)
	wait_for_file "$w/ready.$prog" 120 || { echo "bench: bench/touch of $1 MiB did not get ready" >&2; exit 1; }
	lazy_dump_pid "$prog" "$w/lz" -v3 ||
		{ echo "bench: criu dump --lazy-pages did not listen, see $w/lz/img/dump.log: $(tail -n2 "$w/lz/img/dump.log")" >&2; exit 1; }
	port=$P
	unshare -pf --mount-proc --kill-child sleep 3600 2>"$w/unshare.err" &
	nsholder=$!
	nsinit=
	for _ in $(seq 100); do # its init once it runs sleep (its /proc mounted by then)
		nsinit=$(pgrep -P "$nsholder" || true)
		[ -n "$nsinit" ] && [ "$(cat "/proc/$nsinit/comm" 2>/dev/null)" = sleep ] && break
		nsinit=
		sleep 0.05
	done
	[ -n "$nsinit" ] || { echo "bench: no pid namespace for the restore: $(cat "$w/unshare.err")" >&2; exit 1; }
}

# src_down: the dump ended well (every page asked for and sent), the dumped tree and the
# restore's pid namespace (with the restored program) gone
src_down() {
	lazy_dump_ok "$w/lz" ||
		{ echo "bench: criu dump --lazy-pages did not end well, see $w/lz/img/dump.log: $(tail -n2 "$w/lz/img/dump.log")" >&2; exit 1; }
	dpid=
	kill -KILL "$prog" 2>/dev/null || true # (criu killed it)
	kill -KILL "$nsinit"
	wait "$nsholder" 2>/dev/null || true
	nsinit="" nsholder=""
}

# one_run KEY SIZE DAEMON REP NETNS ADDR SOURCE: one lazy restore by DAEMON, pages from
# ADDR:$port: with SOURCE images, of $w/img ($pid) from our page server; with dump, of a
# fresh criu dump --lazy-pages (src_up), restore and client in the dump's pid namespace
one_run() {
	local key=$1 size=$2 daemon=$3 rep=$4 ns=$5 addr=$6 src=$7 t0 t1 t2 res img=$w/img tag=${1//\//_}
	local -a inns=() inpid=()
	[ -n "$ns" ] && inns=(ip netns exec "$ns")
	prog=$pid
	if [ "$src" = dump ]; then
		src_up "$size"
		img=$w/lz/img tag=$tag-dump
		inpid=(nsenter -t "$nsinit" -p -m)
		inns=("${inpid[@]}")
	fi
	rm -f "$w"/result.* "$img/lazy-pages.socket" "$w/status" "$w/idle"
	mkfifo "$w/status"
	local bin=$LAZYRESTORE
	[ "$daemon" = oursb ] && bin=${OURS_B:?OURS_B: the second binary of ours, for an A/B}
	if [ "$daemon" = stock ]; then
		"${inns[@]}" "$CRIU" lazy-pages -D "$img" --page-server --address "$addr" --port "$port" -o "lazy-$daemon.log" \
			--status-fd 3 3>"$w/status" &
	else
		"${inns[@]}" "$bin" lazy-pages -D "$img" --page-server --address "$addr" --port "$port" \
			-o "lazy-$daemon.log" -v3 --stats "$out/stats-$tag-$size-$rep.json" --status-fd 3 3>"$w/status" &
	fi
	lpid=$!
	timeout 30 head -c1 "$w/status" >/dev/null
	t0=$(now)
	"${inpid[@]}" "$CRIU" restore -D "$img" --lazy-pages -d -o "restore-$daemon.log" ||
		{ echo "bench: criu restore for $daemon failed, see $img/restore-$daemon.log: $(tail -n3 "$img/restore-$daemon.log")" >&2; exit 1; }
	t1=$(now)
	"${inpid[@]}" kill -USR1 "$prog"
	wait "$lpid" || { echo "bench: $daemon lazy-pages failed, see $img/lazy-$daemon.log" >&2; exit 1; }
	t2=$(now)
	lpid=
	cp "$img/lazy-$daemon.log" "$out/lazy-$daemon-$tag-$size-$rep.log"
	wait_for_file "$w/result.$prog" 300 || { echo "bench: restored program wrote no result" >&2; exit 1; }
	res=$(head -n1 "$w/result.$prog")
	[ "$res" = OK ] || { echo "bench: WRONG MEMORY after $daemon restore of $size MiB over $key from $src: $res" >&2; exit 1; }
	tail -n +2 "$w/result.$prog" |
		/usr/bin/python3 "$here/../restore/summarize.py" "$size" busy "$daemon" "$rep" "$t0" "$t1" "$t2" |
		sed "s|^|$key\t|; s|\$|\t$src|" >>"$raw"
	if [ "$daemon" = ours ] && [ "$rep" = 1 ]; then # which connections the client had (one, or a second for faults)
		grep -h -o 'a second connection for urgent requests\|the server takes one connection' "$img/lazy-ours.log" |
			head -n1 | sed 's/^/    ours: /'
	fi
	if [ "$src" = dump ]; then
		src_down
	else
		kill -KILL "$prog"
		while [ -e "/proc/$prog" ]; do sleep 0.05; done
	fi
	prog=
}

# one_row SIZE LINK SOURCE: the page server on LINK's far side (SOURCE images), then REPS x {stock, ours}
one_row() {
	local size=$1 link=$2 src=$3 key ns="" addr=127.0.0.1 rtt rate q
	spid=
	if [ "$link" = lo ]; then
		key=lo
		if [ "$src" = images ]; then
			"$LAZYRESTORE" page-server -D "$w/img" --address 127.0.0.1 --port 0 --sessions 0 -o "$w/ps.log" >"$w/ps.out" 2>&1 &
			spid=$!
		fi
	else
		IFS=/ read -r rtt rate q <<<"$link"
		q=${q:-$queue}
		key=$rtt/$rate/$q
		link_up "$rtt" "$rate" "$q"
		link_check "$key" "$rtt"
		ns=$nsb addr=$addr_a
		ip netns exec "$nsa" "$LAZYRESTORE" page-server -D "$w/img" --address "$addr_a" --port 0 --sessions 0 \
			-o "$w/ps.log" >"$w/ps.out" 2>&1 &
		spid=$!
	fi
	if [ -n "$spid" ]; then
		port=
		for _ in $(seq 50); do
			port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$w/ps.out" 2>/dev/null)
			[ -n "$port" ] && break
			sleep 0.1
		done
		[ -n "$port" ] || { echo "bench: the page server did not start: $(cat "$w/ps.out")" >&2; exit 1; }
	fi
	for rep in $(seq 1 "$reps"); do
		order=$clients
		if [ $((rep % 2)) = 0 ]; then order=$(echo "$clients" | tr ' ' '\n' | tac | tr '\n' ' '); fi
		for daemon in $order; do
			one_run "$key" "$size" "$daemon" "$rep" "$ns" "$addr" "$src"
			tail -n1 "$raw" | awk -F'\t' '{ printf "  %-11s %-6s %5s MiB %-5s rep %s: restore %.3f s, resident %.3f s, %d faulting touches p50 %.1f p99 %.1f us\n", $1, $13, $2, $4, $5, $6, $7, $12, $10, $11 }'
		done
	done
	if [ -n "$spid" ]; then
		stop_pid "$spid"
		wait "$spid" 2>/dev/null || true
		spid=
	fi
	link_down
}

sizes=$(for r in $rows; do echo "${r%%@*}"; done | sort -nu)
for size in $sizes; do
	w=$(scratch "bench-net-$size")
	pid=
	for r in $rows; do # the dump of the rows from images
		if [ "${r%%@*}" = "$size" ] && [ "${r##*@}" = images ]; then
			pid=$(dump_touch "$w" "$size" "$touches") || exit 1
			break
		fi
	done
	for r in $rows; do
		IFS=@ read -r r_size r_link r_src <<<"$r"
		if [ "$r_size" = "$size" ]; then one_row "$size" "$r_link" "$r_src"; fi
	done
	rm -rf "$w"
	w=
done

host_noise "after the runs"
/usr/bin/python3 "$here/table.py" "$raw" "$links" | tee "$out/table.txt"
