#!/bin/bash
# timeout: 300
# lazyrestore record-ws --pid: the working set of a running program, recorded
# before its dump, replayed by a lazy restore of that dump.
#
# Needs swap (the recorder pages the program out and watches its pages come
# back): swap already on is used as it is; otherwise the case makes a swap
# file in its scratch directory, turns it on, and turns it off and removes it
# at exit; if the kernel refuses (no CAP_SYS_ADMIN, a file system without
# swap files), the case is skipped with the reason.
#
# 1. Safety: the recorder is killed (SIGKILL) in the middle of its window,
#    while the program's 64 MiB are in swap: the program must go on and
#    every word must be right; no file is left.
# 2. hugetouch reads 256 scattered pages during a 3 s window: the recording
#    (-o, keyed to no dump) must hold them.  The program is dumped.  The
#    unkeyed file put in the dump is ignored by a restore with a warning;
#    'record-ws --from FILE --images-dir DIR' keys it, and a lazy restore of
#    the dump installs the recorded pages first (stats: ws_pages +
#    ws_skipped = the keyed pages, ws_pages > 0); the 256 reads after that
#    restore must not fault but on pages the replay found not pending; every
#    word must be right.
# 3. One-line errors: a pid that is not there, a dump without the task.
. "$(dirname "$0")/../lib/lazy.sh"

d=$(scratch record-ws-pid)
swapfile=
rec_pid=
cleanup() {
	[ -n "$rec_pid" ] && kill -KILL "$rec_pid" 2>/dev/null
	kill_memhogs "$d"
	if [ -n "$swapfile" ]; then
		sleep 0.2 # the killed programs' swap is freed
		swapoff "$swapfile" 2>/dev/null || echo "    swapoff $swapfile failed: $(swapoff "$swapfile" 2>&1)"
		rm -f "$swapfile"
	fi
	return 0
}
at_exit cleanup

has_swap() { [ "$(awk 'NR > 1 && $3 > $4 + 131072' /proc/swaps | wc -l)" -gt 0 ]; }
if ! has_swap; then
	swapfile=$d/swapfile
	if ! { fallocate -l 256M "$swapfile" && chmod 600 "$swapfile" && mkswap "$swapfile" >/dev/null; } 2>"$d/swap.err" ||
		! swapon "$swapfile" 2>>"$d/swap.err"; then
		rm -f "$swapfile"
		swapfile=
		skip record-ws-pid "no swap and a swap file could not be turned on: $(tail -n1 "$d/swap.err")"
		finish
	fi
	echo "    swap: $swapfile (256 MiB, made by this case, removed at exit); zswap $(cat /sys/module/zswap/parameters/enabled 2>/dev/null || echo absent)"
fi

# start_recorder NAME PID SECONDS ARGS...: record-ws in the background (its
# output in $d/NAME.out), back once the program is paged out.
start_recorder() {
	local name=$1 p=$2 secs=$3
	shift 3
	bounded_start -o "$d/$name.out" "record-ws ($name)" "$d/$name.out" \
		"$LAZYRESTORE" record-ws --pid "$p" --for "$secs" "$@"
	rec_pid=$BOUNDED_PID
	wait_until 60 "record-ws paging pid $p out ($name)" "$d/$name.out" grep -q 'watching for' "$d/$name.out"
}

# ---- 1. the recorder killed in its window ----------------------------------
pid=$(start_hugetouch "$d" -m 64 -w 256) || { fail record-ws-safety "hugetouch did not start"; finish; }
start_recorder safety "$pid" 60 -o "$d/killed.ws"
swapped=$(awk '/^VmSwap:/ {print $2}' "/proc/$pid/status")
ask "$d" "$pid" USR2 touched record-ws-safety-touch >/dev/null
kill -KILL "$rec_pid"
bounded_reap 10 "$rec_pid" 2>/dev/null # no "Killed" job line
rec_pid=
if res=$(ask "$d" "$pid" USR1 result record-ws-safety-words) && [ "${swapped:-0}" -gt 0 ] && [ ! -e "$d/killed.ws" ]; then
	pass "record-ws-safety: recorder killed with ${swapped} kB of the program in swap; the program reads every word right: $res"
else
	fail record-ws-safety "VmSwap ${swapped:-?} kB when the recorder was killed, file left: $([ -e "$d/killed.ws" ] && echo yes || echo no)${res:+; $res}"
fi
kill_memhogs "$d"
sleep 0.2

# ---- 2. record, dump, key, replay --------------------------------------------
# -N: no huge pages, whose collapses after the restore would add minor faults to the reads
pid=$(start_hugetouch "$d" -m 64 -w 256 -N) || { fail record-ws "hugetouch did not start"; finish; }
start_recorder record "$pid" 3 -o "$d/rec.ws"
ask "$d" "$pid" USR2 touched record-ws-touch >/dev/null
bounded_wait 30 "$rec_pid"
rc=$?
rec_pid=
line=$(grep -m1 'pages touched' "$d/record.out")
recorded=$(sed -n 's/.*: \([0-9]*\) pages touched.*/\1/p' <<<"$line")
if [ $rc = 0 ] && [ -s "$d/rec.ws" ] && [ "${recorded:-0}" -ge 256 ]; then
	pass "record-ws-recorded: ${line#*: }"
else
	fail record-ws-recorded "status $rc, '$(tail -n1 "$d/record.out")'"
fi

criu_dump "$pid" "$d/img" || { fail record-ws-dump "$(first_err "$d/img/dump.log")"; finish; }

# restore NAME: lazy restore of the dump, the 256 reads, every word.  Sets FAULTED.
restore() {
	local name=$1 res
	FAULTED=
	wait_tree_gone "$d/img" || { fail "$name" "dumped pids still in use"; return 1; }
	lazy_restore "$name" "$LAZYRESTORE" "$d/img" --workers 0 || return 1
	if [ "$name" = record-ws-replay ]; then
		_bound_poll 30 grep -q 'working set installed' "$d/img/lazy-pages-$name.log" ||
			fail "$name-ws-pass" "no 'working set installed' line in lazy-pages-$name.log"
	fi
	if res=$(ask "$d" "$pid" USR2 touched "$name-touch"); then FAULTED=${res#*faulted}; fi
	daemon_ok "$name" "$d/img"
	if res=$(ask "$d" "$pid" USR1 result "$name-words"); then pass "$name-words"; else echo "$res"; fi
	kill_memhogs "$d"
	sleep 0.2
}

# The unkeyed recording as it is: another dump's for the restore.
cp "$d/rec.ws" "$d/img/lazyrestore-ws.img"
restore record-ws-unkeyed
warn=$(grep -m1 'recorded for another dump' "$d/img/lazy-pages-record-ws-unkeyed.log")
if [ -n "$warn" ] && [ "$(stat_of "$d/img/stats-record-ws-unkeyed.json" ws_pages)" = 0 ]; then
	pass "record-ws-unkeyed-ignored"
	echo "    ${warn#*) }"
else
	fail record-ws-unkeyed-ignored "warning '${warn:-none}', ws_pages $(stat_of "$d/img/stats-record-ws-unkeyed.json" ws_pages)"
fi

rm -f "$d/img/lazyrestore-ws.img"
if "$LAZYRESTORE" record-ws --from "$d/rec.ws" --images-dir "$d/img" >"$d/key.out" 2>&1; then
	keyed=$(sed -n 's/.*: \([0-9]*\) pages of .*keyed to this dump.*/\1/p' "$d/key.out")
	pass "record-ws-keyed: $(tail -n1 "$d/key.out" | sed 's/^lazyrestore record-ws: //')"
else
	fail record-ws-keyed "$(cat "$d/key.out")"
	finish
fi

restore record-ws-replay
st=$d/img/stats-record-ws-replay.json
got=$(stat_of "$st" ws_pages)
skipped=$(stat_of "$st" ws_skipped)
nf=$(wc -w <<<"$FAULTED")
figures="keyed $keyed pages, the replay installed ${got:-?} in $(stat_of "$st" ws_ms) ms (${skipped:-?} not pending any more); of the 256 reads after it $nf faulted"
if [ -n "$keyed" ] && [ "${got:-0}" -gt 0 ] && [ $((got + skipped)) = "$keyed" ] && [ "$nf" -le "${skipped:-0}" ]; then
	pass "record-ws-replayed: $figures"
else
	fail record-ws-replayed "$figures${FAULTED:+: pages$FAULTED}"
fi

# ---- 3. one-line errors --------------------------------------------------------
gone=$(sh -c 'echo $$')
out=$("$LAZYRESTORE" record-ws --pid "$gone" --for 1 -o "$d/x.ws" 2>&1)
rc=$?
if [ $rc = 1 ] && [ "$(wc -l <<<"$out")" = 1 ] && [[ $out == *"pid $gone: no such process"* ]]; then
	pass "record-ws-no-pid: $out"
else
	fail record-ws-no-pid "status $rc: $out"
fi
# a dump whose pstree has no such task: the file's pid rewritten by re-recording a shell
sleep 30 >/dev/null 2>&1 &
other=$!
# recorded before its exec, the shell's child changes its whole mm under the recorder
wait_until 10 "sleep $other to exec" /dev/null grep -qx sleep "/proc/$other/comm"
out=$("$LAZYRESTORE" record-ws --pid "$other" --for 0.05 --images-dir "$d/img" 2>&1 | tail -n1)
kill "$other" 2>/dev/null
wait "$other" 2>/dev/null
if [[ $out == *"no live task $other in this dump"* ]]; then
	pass "record-ws-foreign-task: $out"
else
	fail record-ws-foreign-task "$out"
fi
finish
