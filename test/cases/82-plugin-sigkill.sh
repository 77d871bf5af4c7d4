#!/bin/bash
# timeout: 300
# The engine SIGKILLed under the plugin: restored by `criu restore
# --lazy-pages --libdir build/lib -d` alone, then the engine (the child of the
# supervisor the plugin started) is killed while memory is still being
# served.  The supervisor must restart it and the program see exactly its
# dumped bytes.  1 GiB with random touches, and the events program.
. "$(dirname "$0")/../lib/plugin.sh"
trap plugin_cleanup EXIT

for mode in random events; do
	name=plugin-sigkill-$mode
	d=$(scratch "$name")
	# shellcheck disable=SC2034 # lazy_cleanup (lazy.sh) kills the programs of LAZY_DIR
	LAZY_DIR=$d
	args=(-M events)
	[ $mode = random ] && args=(-M random -m 1024 -n 2000)
	pid=$(start_lazy_prog "$d" "${args[@]}") || { fail "$name" "program did not start"; continue; }
	criu_dump "$pid" "$d/img" || { fail "$name-dump" "$(first_err "$d/img/dump.log")"; continue; }
	plugin_restore "$name" "$d/img" || continue
	kill_engine "$name" "$PLUGIN_PID"
	collect_results "$name" "$d"
	plugin_daemon_ok "$name" "$d/img"
	expect_resumed "$name" "$d/img/lazyrestore-$name.log"
	kill_memhogs "$d"
done
finish
