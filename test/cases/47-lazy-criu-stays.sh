#!/bin/bash
# timeout: 180
# `criu restore --lazy-pages` without -d: criu stays, as the tree's parent,
# until the tree exits, so ours never sees it exit (it takes the restore as
# over 200 ms after the marker; prefetch does not wait for that).  The restored memhog
# touches nothing until the daemon has exited: every page comes from
# background prefetch, with criu alive, and the daemon must still finish.
# Stock is run the same way.  Then ours once more with both CPUs kept busy by
# two spinning shells: the SCHED_IDLE worker gets next to no CPU, and the
# fault thread, prefetching from the marker, still brings every page in.  How
# long that took after the marker is printed, not judged: it depends on
# whatever else the machine runs.
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch lazy-criu-stays)
LAZY_DIR=$d
CRIU_PID=
HOGS=()
stays_cleanup() {
	lazy_cleanup
	if [ -n "$CRIU_PID" ]; then kill -KILL "$CRIU_PID" 2>/dev/null || true; fi
	for h in "${HOGS[@]}"; do kill -KILL "$h" 2>/dev/null || true; done
}
at_exit stays_cleanup

pid=$(start_memhog "$d" -m 32) || { fail lazy-criu-stays "memhog did not start"; finish; }
criu_dump "$pid" "$d/img" || { fail lazy-criu-stays-dump "$(first_err "$d/img/dump.log")"; finish; }

for which in stock ours ours-loaded; do
	name=lazy-criu-stays-$which
	bin=$CRIU
	extra=()
	[ $which != stock ] && bin=$LAZYRESTORE && extra=(--stats "stats-$name.json")
	if [ $which = ours-loaded ]; then
		for _ in 1 2; do
			bash -c 'while :; do :; done' &
			HOGS+=($!)
		done
	fi
	wait_tree_gone "$d/img" || { fail "$name" "dumped pids still in use"; continue; }
	start_lazy "$name" "$bin" "$d/img" "${extra[@]}" || { fail "$name-daemon" "did not start"; continue; }
	bounded_start -o /dev/null "criu restore --lazy-pages without -d ($name)" "$d/img/restore-$name.log" \
		"$CRIU" restore -D "$d/img" --lazy-pages -o "restore-$name.log" -v4
	CRIU_PID=$BOUNDED_PID
	daemon_ok "$name" "$d/img"
	if kill -0 "$CRIU_PID" 2>/dev/null; then
		pass "$name-criu-still-running"
	else
		fail "$name-criu-still-running" "criu restore exited before the tree: $(first_err "$d/img/restore-$name.log")"
	fi
	for h in "${HOGS[@]}"; do kill -KILL "$h" 2>/dev/null || true; done
	HOGS=()
	check_memhog "$name-memory" "$d"
	if [ $which = ours-loaded ]; then
		after=$(sed -n 's/.*"all_resident_after_finished_s": \([0-9.]*\).*/\1/p' "$d/img/stats-$name.json")
		echo "info: $name: all resident ${after:-?} s after the restore-finished marker"
	fi
	kill_memhogs "$d"
	# the tree is gone, so criu restore (its parent) must be about to exit
	bounded_wait 30 "$CRIU_PID"
	CRIU_PID=
	sleep 0.2
done

finish
