#!/bin/bash
# timeout: 240
# Bad input to our daemon: truncated pages, corrupted pagemap, pages that go
# away during the restore, and a hostile peer on lazy-pages.socket.  Each must
# give one clear error naming the file (or peer), the offset and the problem,
# and no restored program may go on running (so none can see wrong bytes).
. "$(dirname "$0")/../lib/lazy.sh"
PY=/usr/bin/python3

d=$(scratch lazy-bad)
LAZY_DIR=$d
at_exit lazy_cleanup

pid=$(start_memhog "$d" -m 32) || { fail lazy-bad "memhog did not start"; finish; }
criu_dump "$pid" "$d/img" || { fail lazy-bad-dump "$(first_err "$d/img/dump.log")"; finish; }
pages=$(ls "$d/img"/pages-*.img | head -n1)

# fresh_copy NAME: a private copy of the dump to damage
fresh_copy() {
	rm -rf "${d:?}/${1:?}" && cp -a "$d/img" "$d/$1" && echo "$d/$1"
}

# expect_refused NAME IMG REGEX: the daemon must exit non-zero at once with an
# Error line matching REGEX, and a restore against it must not leave the
# dumped task running.
expect_refused() {
	local name=$1 img=$2 re=$3 rc
	run_bounded -o /dev/null 30 "lazyrestore lazy-pages ($name)" "$img/lazy.log" \
		"$LAZYRESTORE" lazy-pages -D "$img" -o lazy.log --status-fd 9 9>/dev/null
	rc=$?
	local err
	err=$(grep -m1 'Error' "$img/lazy.log")
	if [ $rc -ne 0 ] && [[ $err =~ $re ]]; then
		pass "$name"
		echo "    $name: $err"
	else
		fail "$name" "status $rc, log: ${err:-$(tail -n1 "$img/lazy.log")}"
	fi
	if criu_restore "$name" "$img" --lazy-pages -d 2>/dev/null; then
		fail "$name-no-restore" "criu restore succeeded without a page server"
	else
		pass "$name-no-restore"
	fi
	kill -0 "$pid" 2>/dev/null && fail "$name-stopped" "task $pid runs" || pass "$name-stopped"
	kill -KILL "$pid" 2>/dev/null
	wait_tree_gone "$d/img"
}

img=$(fresh_copy truncated)
truncate -s -8192 "$img/$(basename "$pages")"
expect_refused lazy-bad-truncated-pages "$img" "offset [0-9]+: .*pages-[0-9]+\.img"

img=$(fresh_copy pagemap)
pm=$img/pagemap-$pid.img
# Overwrite the middle of the pagemap with 0xff: entries become garbage.
sz=$(stat -c %s "$pm")
printf '\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff' | dd of="$pm" bs=1 seek=$((sz / 2)) conv=notrunc status=none
expect_refused lazy-bad-corrupt-pagemap "$img" "pagemap-$pid\.img"

# Pages that vanish after the daemon opened them (I/O error mid-restore):
# the daemon must kill the restored task with one line naming task and page.
# Only the daemon's copy is damaged (-D copy, -W the intact dump that criu
# restore reads its eager pages from).  Twice: the task restored below criu,
# and as criu's sibling (-S, --restore-sibling, as runc asks for it), which
# is not below the criu that connected to the daemon.
# vanish NAME [criu restore args]
vanish() {
	local name=$1 img work rc err
	shift
	img=$(fresh_copy "$name")
	work=$(fresh_copy "$name-work")
	if ! start_lazy "$name" "$LAZYRESTORE" "$img" -W "$work"; then
		fail "$name-pages" "daemon did not start"
		return
	fi
	truncate -s 4096 "$img/$(basename "$pages")"
	criu_restore "$name" "$work" --lazy-pages -d "$@" 2>/dev/null
	wait_lazy 60
	rc=$?
	err=$(grep -m1 'Error' "$work/lazy-pages-$name.log")
	if [ $rc -ne 0 ] && [[ $err =~ task\ $pid.*page\ 0x[0-9a-f]+.*pages-[0-9]+\.img.*killing ]]; then
		pass "$name-pages"
		echo "    $name-pages: $err"
	else
		fail "$name-pages" "status $rc, log: ${err:-$(tail -n1 "$work/lazy-pages-$name.log")}"
	fi
	if grep -q "can't be killed on error" "$work/lazy-pages-$name.log"; then
		fail "$name-found" "$(grep -m1 "can't be killed" "$work/lazy-pages-$name.log")"
	else
		pass "$name-found"
	fi
	sleep 0.5
	if kill -0 "$pid" 2>/dev/null; then
		fail "$name-stopped" "restored task $pid still runs"
		kill -KILL "$pid"
	else
		pass "$name-stopped"
	fi
	wait_tree_gone "$d/img"
}
vanish lazy-bad-vanished
vanish lazy-bad-vanished-sibling --restore-sibling

# A hostile peer on lazy-pages.socket: each bad hand-off gets its error.
# hostile NAME REGEX PYTHON-SNIPPET (s = the connected socket)
hostile() {
	local name=$1 re=$2 code=$3 img rc err
	img=$(fresh_copy "$name")
	start_lazy "$name" "$LAZYRESTORE" "$img" || { fail "$name" "daemon did not start"; return; }
	run_bounded 30 "hostile peer ($name)" "$img/lazy-pages-$name.log" $PY -c "
import os, socket, struct, time
os.chdir('$img')
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect('lazy-pages.socket')
$code
time.sleep(0.3)
s.close()"
	wait_lazy 20
	rc=$?
	err=$(grep -m1 'Error' "$img/lazy-pages-$name.log")
	if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [[ $err =~ $re ]]; then
		pass "$name"
		echo "    $name: $err"
	else
		fail "$name" "status $rc, log: ${err:-$(tail -n1 "$img/lazy-pages-$name.log")}"
	fi
}
hostile lazy-bad-peer-unknown-pid "lazy-pages.socket: offset 0: unknown task 999999" \
	"s.send(struct.pack('i', 999999))"
hostile lazy-bad-peer-short "lazy-pages.socket: offset 0: short message.*task's pid" \
	"s.send(b'\x01\x02')"
hostile lazy-bad-peer-no-fd "lazy-pages.socket: offset 4: task $pid: no file descriptor" \
	"s.send(struct.pack('i', $pid)); s.send(b'\0')"
hostile lazy-bad-peer-not-uffd "lazy-pages.socket: offset 4: task $pid: the descriptor is not a userfaultfd" \
	"r, w = os.pipe(); s.send(struct.pack('i', $pid)); socket.send_fds(s, [b'\0'], [r])"
hostile lazy-bad-peer-early-end "lazy-pages.socket: offset 0: end marker 0x52535446 after 0 of 1 tasks" \
	"s.send(struct.pack('I', 0x52535446))"
finish
