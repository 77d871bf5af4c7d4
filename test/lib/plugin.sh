#!/bin/bash
# shellcheck disable=SC2034 # sets variables for the scripts that source it
# Helpers for the plugin cases test/cases/8*.sh (sourced, not run): restores
# done by `criu restore --lazy-pages --libdir build/lib -d` alone, the plugin
# (build/lib/lazyrestore.so) starting our daemon.  Dumping, programs and
# checks are lazy.sh's.
. "$(dirname "${BASH_SOURCE[0]}")/lazy.sh"

PLUGIN_LIB=$BUILD/lib
PLUGIN_SO=$PLUGIN_LIB/lazyrestore.so
PLUGIN_PID=
# No machine-wide /etc/criu/lazyrestore.conf in the tests: a case that wants one says so.
export LAZYRESTORE_CONFIG=/dev/null

# plugin_restore NAME IMGDIR [criu args]: restore with the plugin; its daemon
# logs to lazyrestore-NAME.log and writes stats-NAME.json (LAZYRESTORE_*).
# Sets PLUGIN_PID to the daemon the plugin started (from criu's log).
plugin_restore() {
	local name=$1 img=$2
	shift 2
	PLUGIN_PID=
	rm -f "$img/lazyrestore-$name.log" "$img/stats-$name.json"
	if ! LAZYRESTORE_LOG="lazyrestore-$name.log" LAZYRESTORE_STATS="stats-$name.json" \
		"$CRIU" restore -D "$img" --lazy-pages --libdir "$PLUGIN_LIB" -d -o "restore-$name.log" -v4 "$@"; then
		fail "$name-restore" "criu restore --lazy-pages with the plugin failed: $(first_err "$img/restore-$name.log")"
		return 1
	fi
	PLUGIN_PID=$(sed -n 's/.*lazyrestore.so: .* lazy-pages (pid \([0-9]*\)) listens.*/\1/p' "$img/restore-$name.log")
	if [ -z "$PLUGIN_PID" ]; then
		fail "$name-restore" "the plugin started no daemon: $(grep -m1 lazyrestore.so "$img/restore-$name.log")"
		return 1
	fi
	pass "$name-restore"
}

# plugin_daemon_ok NAME IMGDIR: the detached daemon (not our child, so its
# status is its log's last word) must say "exit 0" within 60 s.
plugin_daemon_ok() {
	local name=$1 img=$2 log=$2/lazyrestore-$1.log n=600
	while [ -n "$PLUGIN_PID" ] && [ -e "/proc/$PLUGIN_PID" ] && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
	if [ -n "$PLUGIN_PID" ] && [ -e "/proc/$PLUGIN_PID" ]; then
		fail "$name-daemon-exit" "daemon $PLUGIN_PID still runs after 60 s"
		kill -KILL "$PLUGIN_PID"
	elif grep -q 'lazy-pages: exit 0' "$log"; then
		pass "$name-daemon-exit"
	else
		fail "$name-daemon-exit" "$(first_err "$log")"
	fi
	PLUGIN_PID=
}

plugin_cleanup() {
	[ -n "$PLUGIN_PID" ] && kill -KILL "$PLUGIN_PID" 2>/dev/null
	lazy_cleanup
}

# through_plugin NAME IMGDIR DIR CHECK: restore with the plugin, "CHECK NAME DIR",
# then the daemon must finish.
through_plugin() {
	local name=$1 img=$2 d=$3 check=$4
	wait_tree_gone "$img" || { fail "$name" "dumped pids still in use"; return 1; }
	if plugin_restore "$name" "$img"; then
		"$check" "$name" "$d"
		plugin_daemon_ok "$name" "$img"
	fi
	kill_memhogs "$d"
}

# lazyrestore_daemons: pids of every lazyrestore lazy-pages serving IMGDIR.
lazyrestore_daemons() {
	pgrep -f "lazyrestore lazy-pages --images-dir=$1( |$)"
}

# plugin_setup NAME [criu dump args]: a scratch dir d, a memhog (32 MiB, a
# fork child) dumped into img=$d/img, its pid; on failure the case finishes.
plugin_setup() {
	local name=$1
	shift
	d=$(scratch "$name")
	LAZY_DIR=$d
	img=$d/img
	pid=$(start_memhog "$d" -m 32 -f) || { fail "$name" "memhog did not start"; finish; }
	criu_dump "$pid" "$img" "$@" || { fail "$name-dump" "$(first_err "$img/dump.log")"; finish; }
}

