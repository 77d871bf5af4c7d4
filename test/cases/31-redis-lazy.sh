#!/bin/bash
# timeout: 240
# Like 30-redis-eager, but restored with --lazy-pages: its memory is served
# over userfaultfd by stock `criu lazy-pages`, then by ours
# (`lazyrestore lazy-pages`) when that is built.  DBSIZE and every value
# must be as they were put in, and the daemon must finish cleanly.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/redis.sh"

d=$(scratch redis-lazy)
LAZY_PID=
at_exit redis_cleanup

# start_daemon NAME BIN: start "BIN lazy-pages" on the dump (zdtm's command
# line) and wait for its --status-fd byte, i.e. until it listens.
start_daemon() {
	local name=$1 bin=$2 byte
	status_open "$d/status" || return 1
	bounded_start -o "$d/$name.out" "$(basename "$bin") lazy-pages ($name)" "$d/img/lazy-pages-$name.log" \
		"$bin" lazy-pages --no-default-config --images-dir "$d/img" --log-file "lazy-pages-$name.log" \
		--verbosity=4 --status-fd 9 9>"$d/status"
	LAZY_PID=$BOUNDED_PID
	status_byte 30 "the status byte of $(basename "$bin") lazy-pages ($name)" \
		"$d/img/lazy-pages-$name.log" "$LAZY_PID"
	byte=$STATUS_BYTE
	if [ "$byte" != 00 ]; then
		fail "redis-lazy-$name-daemon" "no status byte from '$bin lazy-pages' in 30 s (got '$byte')"
		return 1
	fi
}

# wait_daemon NAME: the daemon must exit 0 once every page is in.
wait_daemon() {
	local name=$1 rc
	bounded_wait 60 "$LAZY_PID"
	rc=$?
	LAZY_PID=
	if [ $rc -eq 0 ]; then
		pass "redis-lazy-$name-daemon"
	else
		fail "redis-lazy-$name-daemon" "exited with status $rc: $(first_error "$d/img/lazy-pages-$name.log")"
	fi
}

# lazy_restore NAME BIN: one lazy restore of the dump, served by BIN.
lazy_restore() {
	local name=$1 bin=$2 lazy
	start_daemon "$name" "$bin" || return 1
	if ! criu_restore "$name" "$d/img" --lazy-pages -d; then
		fail "redis-lazy-$name-restore" "criu restore --lazy-pages failed: $(first_error "$d/img/restore-$name.log")"
		return 1
	fi
	# The pages criu left for the daemon: 0 would make this an eager test.
	lazy=$(nr_lazy "$d/img/restore-$name.log")
	if [ "$lazy" -gt 0 ]; then
		pass "redis-lazy-$name-restore"
	else
		fail "redis-lazy-$name-restore" "restore left no page to the daemon (no nr_lazy in restore-$name.log)"
	fi
	check_redis_pid "redis-lazy-$name" "$DUMPED_PID"
	check_redis "redis-lazy-$name" "$d"
	wait_daemon "$name"
	kill_redis_pid "$DUMPED_PID" || fail "redis-lazy-$name-stop" "restored redis $DUMPED_PID did not die"
}

redis_prepare redis-lazy "$d" || finish
lazy_restore stock "$CRIU"
if [ -x "$LAZYRESTORE" ] && "$LAZYRESTORE" lazy-pages --help >/dev/null 2>&1; then
	lazy_restore ours "$LAZYRESTORE"
else
	skip redis-lazy-ours "build/lazyrestore lazy-pages not built yet"
fi
finish
