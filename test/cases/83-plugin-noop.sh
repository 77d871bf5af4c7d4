#!/bin/bash
# timeout: 300
# Where the plugin must do nothing: a dump with it loaded (nothing started,
# not recorded in the inventory, so the dump restores without it), an eager
# restore with it loaded (no daemon).  And where it must notice: lazy-pages
# set in a config file ($CRIU_CONFIG_FILE) instead of the command line; an
# eager restore forced lazy (LAZYRESTORE_PLUGIN=on) whose criu never
# connects -> the daemon is stopped when criu ends.
. "$(dirname "$0")/../lib/plugin.sh"
trap plugin_cleanup EXIT

plugin_setup plugin-noop --libdir "$PLUGIN_LIB"
pass plugin-noop-dump
if grep -q 'Plugin "lazyrestore"' "$img/dump.log" && ! grep -q 'lazyrestore.so' "$img/dump.log" &&
	! lazyrestore_daemons "$img" >/dev/null; then
	pass plugin-noop-dump-nothing-started
else
	fail plugin-noop-dump-nothing-started "loaded: $(grep -c 'Plugin "lazyrestore"' "$img/dump.log"), said: $(grep -m1 lazyrestore.so "$img/dump.log")"
fi
inv=$("$BUILD/criu/crit" decode -i "$img/inventory.img" --pretty 2>&1)
if [[ $inv == *'"magic": "INVENTORY"'* ]] && [[ $inv != *lazyrestore* ]]; then
	pass plugin-noop-not-in-inventory
else
	fail plugin-noop-not-in-inventory "$(echo "$inv" | grep -A3 plugins)"
fi

# eager NAME [env...] -- [criu args]: eager restore, memory checked, no daemon left.
eager() {
	local name=$1
	shift
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	wait_tree_gone "$img"
	if ! env "${envs[@]}" "$CRIU" restore -D "$img" -d -o "restore-$name.log" -v4 "$@"; then
		fail "$name" "criu restore failed: $(first_err "$img/restore-$name.log")"
		return 1
	fi
	check_memhog "$name" "$d"
	sleep 0.2
	if lazyrestore_daemons "$img" >/dev/null; then
		fail "$name-no-daemon" "daemon left: $(lazyrestore_daemons "$img")"
		# shellcheck disable=SC2046 # one pid a word
		kill -KILL $(lazyrestore_daemons "$img")
	else
		pass "$name-no-daemon"
	fi
	kill_memhogs "$d"
}

# The plugin's dump restores without it (no --libdir; CRIU_LIBS_DIR pointing nowhere useful).
empty=$d/no-plugins
mkdir -p "$empty"
eager plugin-noop-restore-without-plugin CRIU_LIBS_DIR="$empty" -- --libdir "$empty"
if eager plugin-noop-eager -- --libdir "$PLUGIN_LIB" &&
	grep -q 'lazyrestore.so: not a lazy restore (no --lazy-pages' "$img/restore-plugin-noop-eager.log"; then
	pass plugin-noop-eager-said-nothing-to-do
else
	fail plugin-noop-eager-said-nothing-to-do "$(grep -m1 lazyrestore.so "$img/restore-plugin-noop-eager.log")"
fi
if eager plugin-noop-forced LAZYRESTORE_PLUGIN=on -- --libdir "$PLUGIN_LIB" &&
	grep -q 'criu never connected to the lazy-pages daemon (pid [0-9]*): stopped it' \
		"$img/restore-plugin-noop-forced.log"; then
	pass plugin-noop-forced-stopped
else
	fail plugin-noop-forced-stopped "$(grep lazyrestore.so "$img/restore-plugin-noop-forced.log" | tail -n1)"
fi

# lazy-pages in criu's config file only: a lazy restore all the same; the
# plugin's own options from its config file (a bad line warned about).
echo lazy-pages >"$d/criu.conf"
name=plugin-noop-config
printf '# the log\nLAZYRESTORE_LOG=lazyrestore-%s.log\nbogus\n' "$name" >"$d/lazyrestore.conf"
wait_tree_gone "$img"
if CRIU_CONFIG_FILE=$d/criu.conf LAZYRESTORE_CONFIG=$d/lazyrestore.conf "$CRIU" restore -D "$img" \
	--libdir "$PLUGIN_LIB" -d -o "restore-$name.log" -v4; then
	log=$img/restore-$name.log
	PLUGIN_PID=$(sed -n 's/.*lazyrestore.so: .* lazy-pages (pid \([0-9]*\)) listens.*/\1/p' "$log")
	if grep -q 'lazy restore (lazy-pages in $CRIU_CONFIG_FILE)' "$log" && grep -q 'nr_lazy: *[1-9]' "$log"; then
		pass "$name-lazy"
	else
		fail "$name-lazy" "$(grep -m1 lazyrestore.so "$log")"
	fi
	if grep -q "lazyrestore.so): $d/lazyrestore.conf:3: not NAME=VALUE" "$log" &&
		grep -q "listens; log lazyrestore-$name.log" "$log"; then
		pass "$name-plugin-options"
	else
		fail "$name-plugin-options" "$(grep lazyrestore.so "$log" | head -n3 | tr '\n' ' ')"
	fi
	check_memhog "$name" "$d"
	plugin_daemon_ok "$name" "$img"
else
	fail "$name" "criu restore failed: $(first_err "$img/restore-$name.log")"
fi
kill_memhogs "$d"
# A work dir apart from the images (-W): socket and log go there, images are read from -D.
work=$d/work
mkdir -p "$work"
wait_tree_gone "$img"
name=plugin-workdir
if LAZYRESTORE_LOG=lazyrestore-$name.log "$CRIU" restore -D "$img" -W "$work" --lazy-pages --libdir "$PLUGIN_LIB" \
	-d -o "restore-$name.log" -v4; then
	PLUGIN_PID=$(sed -n 's/.*lazyrestore.so: .* lazy-pages (pid \([0-9]*\)) listens.*/\1/p' "$work/restore-$name.log")
	if grep -q "serving $img from $work/lazy-pages.socket" "$work/restore-$name.log"; then
		pass "$name-paths"
	else
		fail "$name-paths" "$(grep lazyrestore.so "$work/restore-$name.log" | tail -n1)"
	fi
	check_memhog "$name" "$d"
	plugin_daemon_ok "$name" "$work"
else
	fail "$name" "criu restore failed: $(first_err "$work/restore-$name.log")"
fi
kill_memhogs "$d"
# criu restore without -d (criu stays, the tree's parent): the daemon is no
# child of criu's, serves everything and exits 0 while criu still runs.
wait_tree_gone "$img"
name=plugin-criu-stays
log=$img/restore-$name.log
rm -f "$log"
LAZYRESTORE_LOG=lazyrestore-$name.log "$CRIU" restore -D "$img" --lazy-pages --libdir "$PLUGIN_LIB" \
	-o "restore-$name.log" -v4 </dev/null >/dev/null 2>&1 &
cpid=$!
wait_for_file "$log" 30
n=300
while ! grep -q 'lazy-pages (pid [0-9]*) listens' "$log" && kill -0 "$cpid" 2>/dev/null && [ $n -gt 0 ]; do
	sleep 0.1
	n=$((n - 1))
done
PLUGIN_PID=$(sed -n 's/.*lazyrestore.so: .* lazy-pages (pid \([0-9]*\)) listens.*/\1/p' "$log")
if [ -n "$PLUGIN_PID" ]; then
	plugin_daemon_ok "$name" "$img"
	if kill -0 "$cpid" 2>/dev/null; then
		pass "$name-criu-still-running"
	else
		fail "$name-criu-still-running" "criu restore exited before the tree: $(first_err "$log")"
	fi
	check_memhog "$name-memory" "$d"
else
	fail "$name" "the plugin started no daemon: $(first_err "$log")"
fi
kill_memhogs "$d"
wait "$cpid" 2>/dev/null
finish
