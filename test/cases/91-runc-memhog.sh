#!/bin/bash
# timeout: 500
# A memhog container (runc, test/lib/runc.sh's fixture) holding
# RUNC_MEMHOG_MIB (1024) MiB of pattern, a fork child that rewrote half of
# it and two threads, migrated lazily by scripts/migrate-runc.sh:
#   remote/stock   runc checkpoint --lazy-pages --page-server (post-copy),
#                  stock `criu lazy-pages --page-server`
#   images/ours    runc checkpoint, `lazyrestore lazy-pages` from the images
#   remote/plugin  (256 MiB) the plugin in runc's `criu swrk`, with
#                  LAZYRESTORE_PAGE_SERVER: it starts `lazyrestore lazy-pages
#                  --page-server`
# Each time every word of every process is checked at the destination, and
# the source container must be gone.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/runc.sh"

d=$(scratch runc-memhog)
at_exit ct_cleanup
runc_ready runc-memhog || finish
MIB=${RUNC_MEMHOG_MIB:-1024}

# _ready N DIR: N memhog processes wrote DIR/ready.*
_ready() { [ "$(memhog_pids "$2" | wc -l)" -ge "$1" ]; }

# variant NAME MODE DAEMON MIB [migrate-runc.sh args]
variant() {
	local name=$1 mode=$2 daemon=$3 mib=$4 v=$d/$1 src=ms-$1-$$ dst=md-$1-$$ pid ns
	shift 4
	ct_pair "$name" "$v" "$src" "$dst" /progs/memhog -d /share -m "$mib" -f -t 2 || return 1
	# memhog and its fork child
	wait_until 120 "memhog ($mib MiB) in $src getting ready" /dev/null _ready 2 "$v/share"
	pid=$CT_PID
	ns=$(readlink "/proc/$pid/ns/pid")
	ct_check_memhog "$name-before" "$src" "$v/share" || return 1

	migrate "$name" "$src" "$dst" --mode "$mode" --daemon "$daemon" --images "$v/img" \
		--bundle "$v/dst" --work "$v/work" --times "$v/times" "$@" || return 1
	lazy_pages_left "$name" "$v/work/restore.log"
	ct_check_memhog "$name" "$dst" "$v/share"
	ct_gone "$name" "$src" "$pid" "$ns"
	rc_runc delete -f "$dst" >/dev/null 2>&1
	rm -rf "$v/img" "$v/work"
}

variant remote-stock remote stock "$MIB"
variant images-ours images ours "$MIB"
variant remote-plugin remote plugin 256
finish
