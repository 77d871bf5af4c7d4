#!/bin/bash
# timeout: 400
# A redis-server container (runc, the fixture of test/lib/runc.sh: its own
# namespaces, loopback only) holding REDIS_KEYS (100k) distinct keys is
# migrated lazily by scripts/migrate-runc.sh to a new container, five ways:
#   remote/stock   runc checkpoint --lazy-pages --page-server (post-copy),
#                  pages fetched by stock `criu lazy-pages --page-server`
#   images/ours    runc checkpoint, images copied to another dir, served
#                  lazily by `lazyrestore lazy-pages`
#   images/plugin  the same, the daemon started by the CRIU plugin inside
#                  runc's `criu swrk`
#   remote-split   remote/stock as two hosts do it: `--role source` and
#                  `--role destination` apart, the images copied by a --copy
#                  script
#   remote/ours    runc checkpoint --lazy-pages --page-server, pages fetched
#                  by `lazyrestore lazy-pages --page-server`
# Each time:
# DBSIZE and every value at the destination as put in, the source container
# gone, and the restored one serving (a new key set and read back).
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/redis.sh"
. "$TOP/test/lib/runc.sh"

d=$(scratch runc-redis)
at_exit ct_cleanup
runc_ready runc-redis || finish

REDIS_PORT=6379
# redis-cli runs on the host, in the container's network namespace
rcli() {
	run_bounded 60 "redis-cli $1" /dev/null nsenter --net="/proc/$CT_PID/ns/net" \
		redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"
}
redis_up() { [ "$(rcli PING 2>/dev/null)" = PONG ]; }

# variant NAME MODE DAEMON [migrate-runc.sh args]
variant() {
	local name=$1 mode=$2 daemon=$3 v=$d/$1 src=rs-$1-$$ dst=rd-$1-$$ pid ns got
	shift 3
	ct_pair "$name" "$v" "$src" "$dst" /usr/bin/redis-server --port "$REDIS_PORT" --bind 127.0.0.1 \
		--save '' --appendonly no --daemonize no --logfile '' || return 1
	wait_until 30 "redis-server in $src answering" /dev/null redis_up
	[ "$name" = remote-stock ] && ct_netns_ok runc-redis "$src"
	redis_data "$v" "$RANDOM$RANDOM"
	redis_fill "$v" || { fail "$name-fill" "SETs through redis-cli --pipe failed"; return 1; }
	check_redis "$name-before" "$v" || return 1
	pid=$CT_PID
	ns=$(readlink "/proc/$pid/ns/pid")

	if [[ $name == *-split ]]; then
		migrate_split "$name" "$src" "$dst" "$v" --mode "$mode" --daemon "$daemon" \
			--bundle "$v/dst" --work "$v/work" "$@" || return 1
	else
		migrate "$name" "$src" "$dst" --mode "$mode" --daemon "$daemon" --images "$v/img" \
			--bundle "$v/dst" --work "$v/work" --times "$v/times" "$@" || return 1
	fi
	CT_PID=$(ct_field "$dst" pid)
	lazy_pages_left "$name" "$v/work/restore.log"
	check_redis "$name" "$v"
	ct_gone "$name" "$src" "$pid" "$ns"
	got=$(rcli SET migrated "$name" >/dev/null && rcli GET migrated)
	if [ "$got" = "$name" ]; then
		pass "$name-serves"
	else
		fail "$name-serves" "SET/GET of a new key in $dst gave '$got'"
	fi
	rc_runc delete -f "$dst" >/dev/null 2>&1
}

variant remote-stock remote stock
variant images-ours images ours --dst-images "$d/images-ours/dst-img"
variant images-plugin images plugin
# two hosts' flow: each side on its own (--role), the images copied between
variant remote-split remote stock --address 127.0.0.1 --port "$(free_port)"
variant remote-ours remote ours
finish
