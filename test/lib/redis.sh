#!/bin/bash
# Helpers for the redis-server cases (test/cases/3x-redis-*.sh).  Source
# after common.sh.  The test starts its own redis-server (own session, stdio
# on /dev/null, port on 127.0.0.1 chosen free), fills it with distinct
# values, and compares what the server answers with what was put in.
# shellcheck disable=SC2034 # sets variables (DUMPED_PID...) for the scripts that source it
REDIS_KEYS=${REDIS_KEYS:-100000}
REDIS_PIDS=()

# A TCP port nobody listens on, on 127.0.0.1.
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		ss -Hltn "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return 0; }
	done
	return 1
}

rcli() { run_bounded 60 "redis-cli $1" /dev/null redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# The server's own pid, from itself.
redis_pid() { rcli INFO server 2>/dev/null | sed -n 's/^process_id:\([0-9]*\).*/\1/p'; }

# redis_start DIR: start redis-server, set REDIS_PORT and REDIS_PID.
# Started from a subshell so it is nobody's child here: once dumped (and
# killed) it must not linger as our zombie and hold its pid.
redis_start() {
	local d=$1 n
	for _ in 1 2 3; do
		REDIS_PORT=$(free_port) || return 1
		(cd "$d" && exec setsid redis-server --port "$REDIS_PORT" --bind 127.0.0.1 \
			--save '' --appendonly no --daemonize no --logfile '' \
			</dev/null >/dev/null 2>&1 &)
		for n in $(seq 50); do
			REDIS_PID=$(redis_pid)
			[ -n "$REDIS_PID" ] && break
			sleep 0.1
		done
		if [ -n "$REDIS_PID" ]; then
			REDIS_PIDS+=("$REDIS_PID")
			return 0
		fi
	done
	return 1
}

# kill_redis_pid PID: kill it if it still is a redis-server (pids get reused).
kill_redis_pid() {
	local pid=$1 n
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ] || return 0
	kill -KILL "$pid" 2>/dev/null
	for n in $(seq 50); do [ -e "/proc/$pid" ] || return 0; sleep 0.1; done
	return 1
}

redis_cleanup() {
	local pid
	for pid in "${REDIS_PIDS[@]}"; do kill_redis_pid "$pid"; done
}

# redis_data DIR SEED: DIR/keys (one key a line) and DIR/values (its value),
# REDIS_KEYS distinct keys with distinct pseudo-random values of 40..200
# bytes, so that no two pages of the heap are alike.
redis_data() {
	awk -v n="$REDIS_KEYS" -v seed="$2" -v d="$1" 'BEGIN {
		srand(seed)
		for (i = 1; i <= n; i++) {
			v = sprintf("%d:", i)
			len = 40 + int(rand() * 160)
			while (length(v) < len)
				v = v sprintf("%08x", int(rand() * 4294967296))
			print "key:" seed ":" i > (d "/keys")
			print v > (d "/values")
		}
	}'
}

# redis_fill DIR: SET every key through one pipelined connection (RESP).
redis_fill() {
	local out
	out=$(paste -d ' ' "$1/keys" "$1/values" | awk '{
		printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length($1), $1, length($2), $2
	}' | rcli --pipe 2>&1) || { echo "$out" >&2; return 1; }
	grep -q 'errors: 0, replies: '"$REDIS_KEYS" <<<"$out" || { echo "$out" >&2; return 1; }
}

# redis_values DIR: the server's value of every key, in DIR/keys order.
redis_values() {
	awk '{ printf "%s%s", (NR % 1000 == 1 ? "MGET" : ""), " " $0; if (NR % 1000 == 0) print "" }
		END { if (NR % 1000) print "" }' "$1/keys" | rcli --raw
}

# check_redis NAME DIR: DBSIZE and every value as put in.
check_redis() {
	local name=$1 d=$2 size want got
	size=$(rcli DBSIZE 2>&1)
	if [ "$size" != "$REDIS_KEYS" ]; then
		fail "$name-dbsize" "DBSIZE says '$size', $REDIS_KEYS keys were set"
		return 1
	fi
	pass "$name-dbsize"
	want=$(sha256sum <"$d/values" | cut -d' ' -f1)
	got=$(redis_values "$d" | sha256sum | cut -d' ' -f1)
	if [ "$want" != "$got" ]; then
		redis_values "$d" >"$d/values.got"
		fail "$name-values" "values differ from those set: $(cmp "$d/values" "$d/values.got" 2>&1 | head -n1)"
		return 1
	fi
	pass "$name-values"
}

# check_redis_pid NAME PID: the server answering is the restored PID.
check_redis_pid() {
	local got
	got=$(redis_pid)
	if [ "$got" = "$2" ]; then
		pass "$1-pid"
	else
		fail "$1-pid" "the server on port $REDIS_PORT has pid '$got', dumped pid was $2"
	fi
}

# first_error LOG: the first error line of a criu log, minus the harmless one.
first_error() {
	grep -m1 'Error' "$1" 2>/dev/null | grep -v 'RLIMIT_NOFILE for self' ||
		grep -m2 'Error' "$1" 2>/dev/null | tail -n1
}

# redis_prepare NAME DIR: start, fill, check and dump; sets DUMPED_PID.
redis_prepare() {
	local name=$1 d=$2
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
		{ fail "$name-setup" "redis-server/redis-cli not installed (scripts/deps.sh)"; return 1; }
	[ -x "$CRIU" ] || { fail "$name-setup" "$CRIU not built"; return 1; }
	redis_start "$d" || { fail "$name-start" "redis-server did not answer on 127.0.0.1"; return 1; }
	redis_data "$d" "$RANDOM$RANDOM"
	redis_fill "$d" || { fail "$name-fill" "SETs through redis-cli --pipe failed"; return 1; }
	check_redis "$name-before-dump" "$d" || return 1
	DUMPED_PID=$REDIS_PID
	if criu_dump "$REDIS_PID" "$d/img"; then
		pass "$name-dump"
	else
		fail "$name-dump" "criu dump failed: $(first_error "$d/img/dump.log")"
		return 1
	fi
	if rcli PING >/dev/null 2>&1; then
		fail "$name-dump" "the server still answers after the dump killed it"
		return 1
	fi
}
