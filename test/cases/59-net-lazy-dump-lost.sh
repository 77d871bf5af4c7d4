#!/bin/bash
# timeout: 300
# A source that cannot come back: `criu dump --lazy-pages` (one connection,
# the pages only in its page pipes) is killed while our lazy-pages restores
# the tree from it.  The tree must be stopped, with one line in the daemon's
# log naming the peer, the task and the page, and exit 1: never a restored
# program reading zero or stale bytes (its check of every word would say so),
# never a hang.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/lazy.sh"
. "$TOP/test/lib/net.sh"

d=$(scratch net-lazy-dump-lost)
x=$d/dump
at_exit 'kill_memhogs "$x"'
mkdir -p "$x"
lazy_dump "$x" 256 || { fail net-lazy-dump-lost-setup "criu dump --lazy-pages did not listen: $(first_err "$x/img/dump.log")"; finish; }
dump_pid=$dpid
# once the tree runs, the dump is killed; then the tree is asked to check every word
(wait_for_file "$d/restored" 120 && kill -KILL "$dump_pid"; touch "$d/killed") &
killer=$!
res=$(NS_AFTER_RESTORE="touch $d/restored; for i in \$(seq 300); do [ -e $d/killed ] && break; sleep 0.1; done" \
	ns_restore lost "$x" "$pid" "$LAZYRESTORE" lazy-pages -D "$x/img" --page-server --address 127.0.0.1 \
	--port "$P" -o lazy-lost.log -v4)
wait "$killer"
echo "$res" | sed 's/^/    /'
log=$x/img/lazy-lost.log
line=$(grep -m1 'Error' "$log")
echo "    ${line#*): }"
if [[ $res == OK* ]]; then
	fail net-lazy-dump-lost "every page was in before the dump was killed: nothing was lost"
elif [[ $res == *BAD* ]]; then
	fail net-lazy-dump-lost "the restored program read wrong bytes: $res"
elif [[ $res == *"memhog is gone"* ]] && [[ $res == *"lazy-pages exit 1"* ]]; then
	pass net-lazy-dump-lost-tree-stopped
else
	fail net-lazy-dump-lost-tree-stopped "$(echo "$res" | tr '\n' ' ')"
fi
if [[ $line =~ task\ [0-9]+\ \(pid\ [0-9]+\):\ page\ 0x[0-9a-f]+:\ .*peer\ 127.0.0.1:$P:.*killing\ the\ restored\ tree ]] &&
	[[ $line =~ pid\ [0-9]+\ page\ 0x[0-9a-f]+ ]]; then
	pass net-lazy-dump-lost-one-line
else
	fail net-lazy-dump-lost-one-line "first error: ${line:-none}"
fi
bounded_reap 30 "$dump_pid"
finish
