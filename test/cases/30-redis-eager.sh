#!/bin/bash
# timeout: 180
# A real service: Debian's redis-server holding ~100k distinct values and
# listening on 127.0.0.1 is dumped with the pinned (patched) criu and restored
# eagerly; then DBSIZE and every value must be as they were put in.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/redis.sh"

d=$(scratch redis-eager)
at_exit redis_cleanup

redis_prepare redis-eager "$d" || finish
if criu_restore eager "$d/img" -d; then
	pass redis-eager-restore
	check_redis_pid redis-eager "$DUMPED_PID"
	check_redis redis-eager "$d"
	if rcli SET after-restore yes >/dev/null && [ "$(rcli GET after-restore)" = yes ]; then
		pass redis-eager-writable
	else
		fail redis-eager-writable "SET/GET after restore failed"
	fi
else
	fail redis-eager-restore "criu restore failed: $(first_error "$d/img/restore-eager.log")"
fi
finish
