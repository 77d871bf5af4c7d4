#!/bin/bash
# Container migration with runc (scripts/migrate-runc.sh), eager against lazy,
# the same container in the same run, variants alternating.
#   run.sh [--sizes "256 1024"] [--reps 5] [--variants "eager images-stock images-ours remote-stock"]
# The container: test/lib/runc.sh's fixture running redis-server, filled
# with SIZE MiB of 4000-byte values (DEBUG POPULATE).  Per run:
#   downtime  from `runc checkpoint` starting until the destination container
#             has answered its first request (GET of one random key, sent by
#             first-reply.py polling inside the destination's network
#             namespace from before the checkpoint, each connect bounded by
#             10 ms: criu drops packets while it restores the network, and
#             TCP would retry a dropped SYN only after a second)
#   resident  from `runc checkpoint` starting until every page is at the
#             destination (eager: runc restore returned; lazy: the daemon exited)
# Variants (--mode/--daemon of migrate-runc.sh):
#   eager         runc checkpoint + runc restore, no lazy page
#   images-stock  runc checkpoint, runc restore --lazy-pages, stock `criu lazy-pages`
#   images-ours   the same, `lazyrestore lazy-pages`
#   remote-stock  runc checkpoint --lazy-pages --page-server (post-copy over
#                 loopback), stock `criu lazy-pages --page-server`
#   remote-ours   the same with ours, when `lazyrestore lazy-pages` has --page-server
# Every run checks the whole dataset at the destination (DEBUG DIGEST against
# the source's, and DBSIZE); a mismatch aborts the bench.  Medians, min and
# max per size and variant, and the ratios of the medians against eager and
# against the stock daemon of the same mode: build/bench/runc/table.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../test/lib/common.sh"
. "$TOP/test/lib/runc.sh"

sizes="256 1024" reps=5 variants="eager images-stock images-ours remote-stock"
if grep -q -- '--page-server' <<<"$("$LAZYRESTORE" lazy-pages --help 2>&1)"; then variants="$variants remote-ours"; fi
while [ $# -gt 0 ]; do
	case $1 in
	--sizes) sizes=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--variants) variants=$2; shift 2 ;;
	*) echo "usage: run.sh [--sizes \"MIB...\"] [--reps N] [--variants \"...\"]" >&2; exit 2 ;;
	esac
done
out=$BUILD/bench/runc
rm -rf "$out" && mkdir -p "$out"
raw=$out/raw.tsv
printf 'size_mib\tvariant\trep\trss_mib\tdowntime_s\tresident_s\tcheckpoint_s\trestore_s\n' >"$raw"
VLEN=4000
PORT=6379
at_exit ct_cleanup
w=$BUILD/bench/runc-work
rm -rf "$w" && mkdir -p "$w"
RUNC_ROOT=$w/runc-root

die() { echo "bench/runc: $*" >&2; exit 1; }
if ! runc_ready bench-runc >"$w/probe.out"; then
	# runc cannot run here (its reason), or the fixture failed
	echo "bench/runc: $(cat "$w/probe.out")"
	grep -q '^SKIP' "$w/probe.out" && exit 0
	exit 1
fi

rcli_ns() { # NETNS ARGS...
	local ns=$1
	shift
	run_bounded 120 "redis-cli $1" /dev/null nsenter --net="/run/netns/$ns" redis-cli -h 127.0.0.1 -p $PORT "$@"
}
redis_up() { [ "$(rcli_ns "$1" PING 2>/dev/null)" = PONG ]; }
stamp_of() { sed -n "s/^$1 //p" "$2"; }

declare -A DIGEST=()
# one_run SIZE VARIANT REP
one_run() {
	local size=$1 variant=$2 rep=$3 keys mode daemon v src dst poll t rss got
	keys=$((size * 1024 * 1024 / 4096))
	mode=${variant%%-*} daemon=${variant#*-}
	[ "$variant" = eager ] && daemon=stock
	v=$w/$size-$variant-$rep src=bs$$-$rep dst=bd$$-$rep
	ct_pair "$variant" "$v" "$src" "$dst" /usr/bin/redis-server --port "$PORT" --bind 127.0.0.1 \
		--save '' --appendonly no --daemonize no --logfile '' --enable-debug-command yes ||
		die "the containers could not be set up"
	wait_until 30 "redis-server in $src answering" /dev/null redis_up "lr-$src"
	[ "$(rcli_ns "lr-$src" DEBUG POPULATE "$keys" key $VLEN)" = OK ] || die "DEBUG POPULATE failed"
	if [ -z "${DIGEST[$size]:-}" ]; then
		DIGEST[$size]=$(rcli_ns "lr-$src" DEBUG DIGEST)
	fi
	rss=$(($(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$CT_PID/status") / 1024))

	# the first request, polled from inside the destination's network namespace
	bounded_start -o "$v/poll.out" "first-reply poller ($variant)" "$v/poll.out" \
		nsenter --net="/run/netns/lr-$dst" /usr/bin/python3 "$here/first-reply.py" $PORT \
		"key:$(((RANDOM * 32768 + RANDOM) % keys))" $VLEN "$v/poll.ready" 200
	poll=$BOUNDED_PID
	wait_until 30 "first-reply poller starting" "$v/poll.out" test -e "$v/poll.ready"

	RUNC_IDS+=("$dst")
	run_bounded -o "$v/migrate.log" 300 "migrate-runc.sh ($size MiB, $variant)" "$v/migrate.log" \
		"$MIGRATE" --root "$RUNC_ROOT" --criu "$CRIU" --lazyrestore "$LAZYRESTORE" --timeout 240 \
		--mode "$mode" --daemon "$daemon" --images "$v/img" --work "$v/work" --bundle "$v/dst" \
		--times "$v/times" "$src" "$dst" || die "migration ($size MiB, $variant) failed: $(tail -n1 "$v/migrate.log")"
	bounded_wait 200 "$poll" || die "no first reply ($size MiB, $variant): $(cat "$v/poll.out")"
	t=$(tail -n1 "$v/poll.out")

	got=$(rcli_ns "lr-$dst" DEBUG DIGEST)
	[ "$got" = "${DIGEST[$size]}" ] || die "$size MiB, $variant: DEBUG DIGEST $got at the destination, ${DIGEST[$size]} at the source"
	[ "$(rcli_ns "lr-$dst" DBSIZE)" = "$keys" ] || die "$size MiB, $variant: DBSIZE is not $keys"

	awk -v size="$size" -v variant="$variant" -v rep="$rep" -v rss="$rss" -v t="$t" '
		{ at[$1] = $2 }
		END {
			t0 = at["checkpoint_start"]
			printf "%s\t%s\t%s\t%s\t%.4f\t%.4f\t%.4f\t%.4f\n", size, variant, rep, rss, t - t0,
				at["resident"] - t0, at["images_ready"] - t0, at["restore_done"] - at["restore_start"]
		}' "$v/times" >>"$raw"
	tail -n1 "$raw"
	rc_runc delete -f "$dst" >/dev/null 2>&1 || true
	ip netns del "lr-$src" 2>/dev/null || true
	ip netns del "lr-$dst" 2>/dev/null || true
	[ -n "${KEEP:-}" ] || rm -rf "$v"
}

echo "bench/runc: $(date -u '+%F %T') UTC, $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1), Linux $(uname -r), commit $(git -C "$TOP" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "sizes: $sizes; reps: $reps; variants (rotated each rep): $variants"
host_noise "before the runs"
printf 'size_mib\tvariant\trep\trss_mib\tdowntime_s\tresident_s\tcheckpoint_s\trestore_s\n'
read -r -a vs <<<"$variants"
for size in $sizes; do
	for rep in $(seq 1 "$reps"); do
		n=${#vs[@]}
		for i in $(seq 0 $((n - 1))); do
			one_run "$size" "${vs[$(((i + rep - 1) % n))]}" "$rep"
		done
	done
done
host_noise "after the runs"
/usr/bin/python3 "$here/summarize.py" "$raw" | tee "$out/table.txt"
