#!/bin/bash
# timeout: 300
# The plugin against what it finds: a lazy-pages daemon (ours or stock)
# already listening on the work dir's socket -> it steps aside, says so in
# criu's log, and that daemon serves the restore; a stale socket file with
# no listener -> it starts ours anyway.  The engine cannot start (no binary,
# damaged images) -> criu restore fails with one line naming why, before any
# task is forked, and no daemon is left behind.  LAZYRESTORE_PLUGIN=off ->
# it does nothing (criu's own error: no daemon).
. "$(dirname "$0")/../lib/plugin.sh"
trap plugin_cleanup EXIT

plugin_setup plugin-conflict

# step_aside NAME BIN: BIN lazy-pages listens first; the plugin must leave the restore to it.
step_aside() {
	local name=$1 bin=$2 log=$img/restore-$1.log
	wait_tree_gone "$img"
	start_lazy "$name" "$bin" "$img" || { fail "$name" "$bin lazy-pages did not start"; return; }
	if ! "$CRIU" restore -D "$img" --lazy-pages --libdir "$PLUGIN_LIB" -d -o "restore-$name.log" -v4; then
		fail "$name-restore" "$(first_err "$log")"
		wait_lazy 10
		return
	fi
	if grep -q "lazyrestore.so): a lazy-pages daemon already listens on $img/lazy-pages.socket: stepping aside" "$log" &&
		! grep -q 'lazyrestore.so: .* listens; log' "$log"; then
		pass "$name-stepped-aside"
	else
		fail "$name-stepped-aside" "criu's log: $(grep -m1 lazyrestore.so "$log")"
	fi
	check_memhog "$name" "$d"
	daemon_ok "$name" "$img"
	kill_memhogs "$d"
}
step_aside plugin-conflict-ours "$LAZYRESTORE"
step_aside plugin-conflict-stock "$CRIU"

# A socket file nobody listens on (a daemon that died): the plugin starts ours.
wait_tree_gone "$img"
rm -f "$img/lazy-pages.socket"
(cd "$img" && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('lazy-pages.socket')")
if [ -S "$img/lazy-pages.socket" ]; then
	through_plugin plugin-conflict-stale "$img" "$d" check_memhog
else
	fail plugin-conflict-stale "could not leave a stale socket file"
fi

# refused NAME IMG REGEX [env...]: criu restore must fail, its log naming the
# reason in one lazyrestore.so Error line matching REGEX, before any task is
# forked; no task runs and no daemon is left.
refused() {
	local name=$1 dir=$2 re=$3 log=$2/restore-$1.log err n
	shift 3
	wait_tree_gone "$img"
	if env "$@" "$CRIU" restore -D "$dir" --lazy-pages --libdir "$PLUGIN_LIB" -d -o "restore-$name.log" -v4 \
		>/dev/null 2>&1; then
		fail "$name" "criu restore succeeded"
		kill_memhogs "$d"
		return
	fi
	err=$(grep 'Error (lazyrestore.so)' "$log")
	n=$(grep -c 'Error (lazyrestore.so)' "$log")
	if [ "$n" = 1 ] && [[ $err =~ $re ]] && ! grep -q 'Forking task' "$log"; then
		pass "$name"
		echo "    $name: ${err#*: }"
	else
		fail "$name" "$n plugin error lines, forked: $(grep -c 'Forking task' "$log"); first error: $(first_err "$log")"
	fi
	if kill -0 "$pid" 2>/dev/null; then
		fail "$name-no-task" "task $pid runs"
		kill -KILL "$pid"
	else
		pass "$name-no-task"
	fi
	if lazyrestore_daemons "$dir" >/dev/null; then
		fail "$name-no-daemon" "a daemon was left: $(lazyrestore_daemons "$dir")"
	else
		pass "$name-no-daemon"
	fi
}
refused plugin-fail-no-binary "$img" "can't start the lazy-pages engine: no lazyrestore binary \(/nonexistent/lazyrestore\)" \
	LAZYRESTORE_BIN=/nonexistent/lazyrestore

bad=$d/truncated
rm -rf "$bad" && cp -a "$img" "$bad"
pages=$(ls "$bad"/pages-*.img | head -n1)
truncate -s -8192 "$pages"
refused plugin-fail-bad-images "$bad" "can't start the lazy-pages engine: .*exited before listening: .*Error .*pages-[0-9]+\.img"

# The restore fails after the daemon started (the dumped pids are taken by a
# first, eager restore of the same dump): the plugin stops its daemon, and the
# running tree of that first restore is not harmed.
wait_tree_gone "$img"
name=plugin-fail-after-start
log=$img/restore-$name.log
if "$CRIU" restore -D "$img" -d -o restore-eager-first.log -v4; then
	if "$CRIU" restore -D "$img" --lazy-pages --libdir "$PLUGIN_LIB" -d -o "restore-$name.log" -v4 \
		>/dev/null 2>&1; then
		fail "$name" "the second restore of the same pids succeeded"
	else
		dpid=$(sed -n 's/.*the restore failed: stopping the lazy-pages daemon (pid \([0-9]*\)).*/\1/p' "$log")
		n=50 # gone, or a zombie not yet reaped by its new parent
		while [ -n "$dpid" ] && [ -e "/proc/$dpid" ] && [ "$(ps -o stat= -p "$dpid")" != Z ] && [ $n -gt 0 ]; do
			sleep 0.1
			n=$((n - 1))
		done
		if [ -n "$dpid" ] && { [ ! -e "/proc/$dpid" ] || [ "$(ps -o stat= -p "$dpid")" = Z ]; }; then
			pass "$name-daemon-stopped"
		else
			fail "$name-daemon-stopped" "daemon '${dpid}': $(grep lazyrestore.so "$log" | tail -n1)"
		fi
	fi
	check_memhog "$name-first-tree-intact" "$d"
else
	fail "$name" "the first, eager restore failed: $(first_err "$img/restore-eager-first.log")"
fi
kill_memhogs "$d"

# LAZYRESTORE_PLUGIN=off: no daemon, so criu's own connect fails.
wait_tree_gone "$img"
rm -f "$img/lazy-pages.socket"
if LAZYRESTORE_PLUGIN=off "$CRIU" restore -D "$img" --lazy-pages --libdir "$PLUGIN_LIB" -d -o restore-off.log -v4 \
	>/dev/null 2>&1; then
	fail plugin-off "criu restore succeeded without a daemon"
	kill_memhogs "$d"
elif grep -q 'lazyrestore.so: not a lazy restore (LAZYRESTORE_PLUGIN=off)' "$img/restore-off.log" &&
	grep -q 'connect to lazy-pages.socket failed' "$img/restore-off.log"; then
	pass plugin-off
else
	fail plugin-off "$(first_err "$img/restore-off.log")"
fi
finish
