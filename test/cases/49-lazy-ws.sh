#!/bin/bash
# timeout: 300
# Working-set replay.  hugetouch (64 MiB of known words) is dumped once and
# lazily restored by ours twice.  The first restore records (--record-ws, the
# prefetch held for --record-ws-for) while the program reads 256 scattered
# pages, each of which must fault; the second finds the file,
# installs the recorded pages right after the hand-off, before anything
# else, while criu holds the tasks (criu-patches/0014, --ws-hold): no read
# that faulted while recording may fault again (the program names the pages
# whose read faulted), the stats must show every recorded page installed by
# the working-set pass, and both logs must say the tasks were held until it
# was in.  A third restore (--ws-hold 0) has the reads race the replay.  The total of minor faults is only
# reported.  Each restore checks every word.  A second dump restored
# with the first dump's file must ignore it with a warning.
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch lazy-ws)
d2=
ws_cleanup() {
	kill_memhogs "$d"
	[ -n "$d2" ] && kill_memhogs "$d2"
	return 0
}
at_exit ws_cleanup

# restore_ws NAME IMG DIR PID [daemon options]: restore, let the program read its
# 256 pages, wait for the daemon, check every word.  hugetouch -g reads once it
# finds DIR/go.PID: made before a recording restore, so that the reads start
# within a millisecond of the program resuming (a fast host's prefetch beats a
# signal sent after criu returns to every page), and after the working-set pass
# otherwise.  Sets MINFLT and FAULTED (the pages whose read faulted).
restore_ws() {
	local name=$1 img=$2 dir=$3 p=$4 res rec='' early=''
	shift 4
	[[ " $* " == *" --record-ws "* ]] && rec=1
	[ "${1:-}" = --early ] && { early=1; shift; }
	MINFLT=
	FAULTED=
	wait_tree_gone "$img" || { fail "$name" "dumped pids still in use"; return 1; }
	rm -f "$dir/touched.$p" "$dir/go.$p"
	[ -n "$rec$early" ] && : >"$dir/go.$p"
	lazy_restore "$name" "$LAZYRESTORE" "$img" "$@" || return 1
	if [ -s "$img/lazyrestore-ws.img" ] && [ -z "$rec$early" ] &&
		! grep -q 'ignored' "$img/lazy-pages-$name.log"; then
		_bound_poll 30 grep -q 'working set installed' "$img/lazy-pages-$name.log" ||
			fail "$name-ws-pass" "no 'working set installed' line in lazy-pages-$name.log"
	fi
	[ -n "$rec" ] || : >"$dir/go.$p"
	if ! wait_for_file "$dir/touched.$p" 120; then
		fail "$name-touch" "task $p wrote no touched"
	elif res=$(cat "$dir/touched.$p") && [[ $res == OK* ]]; then
		MINFLT=$(sed -n 's/.*minflt \([0-9]*\).*/\1/p' <<<"$res")
		FAULTED=${res#*faulted}
	else
		fail "$name-touch" "task $p: $res"
	fi
	daemon_ok "$name" "$img"
	# ask's FAIL line (wrong words) is printed, not swallowed with its OK answer
	if res=$(ask "$dir" "$p" USR1 result "$name-words"); then pass "$name-words"; else echo "$res"; fi
	kill_memhogs "$dir"
	sleep 0.2
}

# -N: no huge pages, whose collapses after the restore would add minor faults to the reads
pid=$(start_hugetouch "$d" -m 64 -w 256 -N -g) || { fail lazy-ws "hugetouch did not start"; finish; }
criu_dump "$pid" "$d/img" || { fail lazy-ws-dump "$(first_err "$d/img/dump.log")"; finish; }

# While recording, nothing is prefetched for --record-ws-for seconds after the
# restore-finished marker: every one of the 256 reads (made within milliseconds)
# faults and is recorded, none is won by the prefetch.
restore_ws lazy-ws-record "$d/img" "$d" "$pid" --record-ws --record-ws-for 3 --workers 0
m1=$MINFLT
f1=$FAULTED
n1=$(wc -w <<<"$f1")
rec=$(stat_of "$d/img/stats-lazy-ws-record.json" ws_recorded)
if [ -s "$d/img/lazyrestore-ws.img" ] && [ "$n1" = 256 ] && [ "${rec:-0}" -ge 256 ]; then
	pass "lazy-ws-recorded: all 256 reads faulted while recording, $rec pages recorded"
else
	fail "lazy-ws-recorded" "$n1 of the 256 reads faulted while recording, ws_recorded ${rec:-?}: $(first_err "$d/img/lazy-pages-lazy-ws-record.log")"
fi

restore_ws lazy-ws-replay "$d/img" "$d" "$pid" --workers 0 --ws-hold 1000
m2=$MINFLT
f2=$FAULTED
st=$d/img/stats-lazy-ws-replay.json
got=$(stat_of "$st" ws_pages)
skipped=$(stat_of "$st" ws_skipped)
# every page whose read faulted while recording was recorded, so it must not fault after the
# replay, but for those the replay found not pending (a prefetch worker had claimed them)
again=$(comm -12 <(tr ' ' '\n' <<<"$f1" | sed '/^$/d' | sort) <(tr ' ' '\n' <<<"$f2" | sed '/^$/d' | sort) | tr '\n' ' ')
figures="recorded $rec pages, the replay installed ${got:-?} right after the hand-off in $(stat_of "$st" ws_ms) ms (${skipped:-?} not pending any more); of the 256 reads $n1 faulted while recording (${m1:-?} minor faults), ${m2:-?} minor faults after the replay, on pages never recorded"
if [ -n "$rec" ] && [ "${got:-0}" -gt 0 ] && [ $((got + skipped)) = "$rec" ] && [ "$n1" -gt 0 ] &&
	[ "$(wc -w <<<"$again")" -le "${skipped:-0}" ] && [ -n "$m2" ]; then
	pass "lazy-ws-replayed: $figures"
else
	fail "lazy-ws-replayed" "$figures${again:+; faulted again after the replay: pages $again}"
fi
held=$(grep -m1 'tasks released' "$d/img/lazy-pages-lazy-ws-replay.log")
if [[ $held == *"working set installed"* ]] &&
	grep -q 'the daemon installs the working set before the tasks run' "$d/img/restore-lazy-ws-replay.log"; then
	pass "lazy-ws-held: criu held the tasks until the set was in (${held#*) })"
else
	fail "lazy-ws-held" "daemon: '${held:-no release line}'; criu's restore log: $(grep -m1 'lazy-pages:.*daemon' "$d/img/restore-lazy-ws-replay.log" || echo 'no hold line')"
fi

# The reads racing the replay (they start as the tree resumes): faults served
# between its batches, on pages it has yet to install.  Every word is checked.
restore_ws lazy-ws-race "$d/img" "$d" "$pid" --early --workers 0 --ws-hold 0
st=$d/img/stats-lazy-ws-race.json
echo "    the replay raced by the reads: $(stat_of "$st" faults) faults, $(stat_of "$st" ws_pages) recorded pages installed by the replay (and $(stat_of "$st" ws_gap_pages) between them), $(stat_of "$st" ws_skipped) not pending any more"

# A foreign file: another dump of the same program must not take it.
d2=$(scratch lazy-ws-foreign)
pid2=$(start_hugetouch "$d2" -m 64 -w 256 -g) || { fail lazy-ws-foreign "hugetouch did not start"; finish; }
criu_dump "$pid2" "$d2/img" || { fail lazy-ws-foreign-dump "$(first_err "$d2/img/dump.log")"; finish; }
cp "$d/img/lazyrestore-ws.img" "$d2/img/" 2>/dev/null
restore_ws lazy-ws-foreign "$d2/img" "$d2" "$pid2" --workers 0
line=$(grep -m1 'recorded for another dump' "$d2/img/lazy-pages-lazy-ws-foreign.log")
got2=$(stat_of "$d2/img/stats-lazy-ws-foreign.json" ws_pages)
if [ -n "$line" ] && [ "${got2:-x}" = 0 ]; then
	pass "lazy-ws-foreign-ignored"
	echo "    ${line#*) }"
else
	fail "lazy-ws-foreign-ignored" "warning '${line:-none}', ws_pages ${got2:-?}"
fi
kill_memhogs "$d2"
finish
