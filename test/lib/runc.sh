#!/bin/bash
# shellcheck disable=SC2034 # sets variables for the scripts that source it
# Helpers for the runc cases (test/cases/9x-runc-*.sh), sourced after
# common.sh (and redis.sh for redis).  The fixture is an OCI bundle made
# offline from Debian packages:
#   rootfs/bin/busybox   busybox-static (sh, the container's init wrapper)
#   /usr                 the host's, bound read-only (redis-server and its
#                        libraries; /lib and /lib64 are links into it, as on
#                        Debian 12's merged /usr)
#   /progs               build/test-progs, read-only (memhog)
#   /share               a host directory, read-write (memhog's ready/result files)
#   /tmp                 a tmpfs
# with runc's default namespaces (pid, ipc, uts, mount) and a network
# namespace made by the case (ct_netns: the loopback device, up, nothing
# else), named by path in config.json.  It has to be: runc checkpoints with
# criu's --empty-ns network ("runc doesn't manage network devices"), so a
# network namespace runc made itself comes back with its loopback down and
# no address.  A namespace given by path is external to the checkpoint; at
# restore runc hands criu the destination bundle's one (as docker and podman
# do), and each host prepares its own.  The init
# puts its stdio on the container's own /dev/null first: a descriptor of the
# host's (runc's stdio) is on a mount criu cannot see from the container.
# Containers live in their own runc state dir, RUNC_ROOT; ct_cleanup
# deletes every container a case made.
RUNC_ROOT=$BUILD/test-work/runc-root
MIGRATE=$TOP/scripts/migrate-runc.sh
RUNC_IDS=()
CT_PID=''

rc_runc() { runc --root "$RUNC_ROOT" "$@"; }

# ct_field ID FIELD: a field of `runc state ID` (pid, status, bundle)
ct_field() {
	rc_runc state "$1" 2>/dev/null | sed -n "s/^ *\"$2\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p"
}

CT_NETNS=()
# ct_netns NAME: a network namespace /run/netns/NAME with its loopback up.
ct_netns() {
	ip netns del "$1" 2>/dev/null || true
	ip netns add "$1" && ip -n "$1" link set lo up && CT_NETNS+=("$1")
}

# ct_bundle DIR SHARE NETNS ARGS...: an OCI bundle in DIR whose process runs
# ARGS (stdio on the container's /dev/null), SHARE bound at /share, in the
# network namespace /run/netns/NETNS.
ct_bundle() {
	local b=$1 share=$2 netns=$3 a
	shift 3
	mkdir -p "$b/rootfs"/{bin,dev,proc,sys,tmp,usr,progs,share,etc} "$share" || return 1
	cp /bin/busybox "$b/rootfs/bin/busybox" || return 1
	for a in sh cat ls ps kill sleep ip; do ln -sf busybox "$b/rootfs/bin/$a"; done
	ln -sfn usr/lib "$b/rootfs/lib"
	ln -sfn usr/lib64 "$b/rootfs/lib64"
	rm -f "$b/config.json"
	runc spec --bundle "$b" || return 1
	python3 - "$b/config.json" "$share" "$PROGS" "/run/netns/$netns" "$@" <<'PY'
import json, sys
path, share, progs, netns, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
c = json.load(open(path))
for ns in c["linux"]["namespaces"]:
    if ns["type"] == "network":
        ns["path"] = netns
p = c["process"]
p["terminal"] = False
p["args"] = ["/bin/sh", "-c", 'exec </dev/null >/dev/null 2>&1; exec "$@"', "init"] + args
c["hostname"] = "lazyrestore-test"
c["mounts"] += [
    {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["bind", "ro", "nosuid", "nodev"]},
    {"destination": "/progs", "type": "bind", "source": progs, "options": ["bind", "ro", "nosuid", "nodev"]},
    {"destination": "/share", "type": "bind", "source": share, "options": ["bind", "rw", "nosuid", "nodev"]},
    {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]},
]
json.dump(c, open(path, "w"), indent=1)
PY
}

# ct_run ID BUNDLE: runc run -d, bounded; sets CT_PID (the init's host pid).
ct_run() {
	local id=$1 b=$2
	RUNC_IDS+=("$id")
	mkdir -p "$RUNC_ROOT"
	run_bounded 60 "runc run -d $id" "$b/runc-run.log" \
		runc --root "$RUNC_ROOT" --log "$b/runc-run.log" run -d --bundle "$b" "$id" || return 1
	CT_PID=$(ct_field "$id" pid)
	[ -n "$CT_PID" ]
}

ct_cleanup() {
	local id
	for id in "${RUNC_IDS[@]}"; do
		rc_runc state "$id" >/dev/null 2>&1 && rc_runc delete -f "$id" >/dev/null 2>&1
	done
	for id in "${CT_NETNS[@]}"; do ip netns del "$id" 2>/dev/null || true; done
	return 0
}

# runc_ready: 0 if runc can run a container here; else prints the SKIP line
# with runc's own words and returns 1.  The probe is a real container (the
# fixture's bundle, running `true`), not a guess from the host's setup.
runc_ready() {
	local name=$1 b err rc
	if ! command -v runc >/dev/null; then
		skip "$name" "runc is not installed (scripts/deps.sh installs Debian's runc)"
		return 1
	fi
	if [ ! -x /bin/busybox ] || ! file -L /bin/busybox 2>/dev/null | grep -q 'statically linked'; then
		skip "$name" "no static /bin/busybox (scripts/deps.sh installs busybox-static)"
		return 1
	fi
	b=$(scratch runc-probe)
	ct_netns "lr-probe-$$" >"$b/bundle.log" 2>&1 &&
		ct_bundle "$b" "$b/share" "lr-probe-$$" /usr/bin/true >>"$b/bundle.log" 2>&1 ||
		{ fail "$name-fixture" "bundle: $(tail -n1 "$b/bundle.log")"; return 1; }
	mkdir -p "$RUNC_ROOT"
	RUNC_IDS+=("probe-$$")
	run_bounded -o "$b/run.out" 60 "runc run (probe)" "$b/runc.log" \
		runc --root "$RUNC_ROOT" --log "$b/runc.log" run --bundle "$b" "probe-$$"
	rc=$?
	[ $rc -eq 0 ] && return 0
	# runc's own failure is logged; a container that ran and failed is the fixture's
	err=$(grep -m1 -o 'msg="[^"]*"' "$b/runc.log" | head -c 300)
	if [ -n "$err" ]; then
		skip "$name" "runc cannot run a container on this host: $err"
	else
		fail "$name-fixture" "the probe container (/usr/bin/true) exited $rc: $(tail -n1 "$b/run.out")"
	fi
	return 1
}

# ct_pair NAME V SRC DST ARGS...: the source and destination of one
# migration: a network namespace each (lr-SRC, lr-DST: two hosts would have
# two), bundles V/src and V/dst running ARGS with V/share at /share, and SRC
# started (CT_PID).  On failure one FAIL line (NAME-bundle or NAME-run).
ct_pair() {
	local name=$1 v=$2 src=$3 dst=$4
	shift 4
	mkdir -p "$v"
	if ! ct_netns "lr-$src" >"$v/bundle.log" 2>&1 || ! ct_netns "lr-$dst" >>"$v/bundle.log" 2>&1 ||
		! ct_bundle "$v/src" "$v/share" "lr-$src" "$@" >>"$v/bundle.log" 2>&1 ||
		! ct_bundle "$v/dst" "$v/share" "lr-$dst" "$@" >>"$v/bundle.log" 2>&1; then
		fail "$name-bundle" "$(tail -n1 "$v/bundle.log")"
		return 1
	fi
	ct_run "$src" "$v/src" || { fail "$name-run" "runc run: $(tail -n1 "$v/src/runc-run.log")"; return 1; }
}

# ct_netns_ok NAME ID: the container's network has the loopback device and nothing else.
ct_netns_ok() {
	local name=$1 pid addrs
	pid=$(ct_field "$2" pid)
	addrs=$(nsenter --net="/proc/$pid/ns/net" ip -o addr show 2>&1 | awk '{ print $2, $4 }' | sort | tr '\n' ' ')
	if [[ $addrs =~ ^(lo\ 127\.0\.0\.1/8\ )(lo\ ::1/128\ )?$ ]] &&
		nsenter --net="/proc/$pid/ns/net" ip -o link show | awk -F': ' '{ print $2 }' | grep -qx lo &&
		[ "$(nsenter --net="/proc/$pid/ns/net" ip -o link show | wc -l)" = 1 ]; then
		pass "$name-loopback-only"
	else
		fail "$name-loopback-only" "the container's addresses: '$addrs'"
	fi
}

# ct_host_pid INIT_PID NSPID: the host pid of the container's process NSPID.
ct_host_pid() {
	local ns f last
	ns=$(readlink "/proc/$1/ns/pid") || return 1
	for f in /proc/[0-9]*; do
		[ "$(readlink "$f/ns/pid" 2>/dev/null)" = "$ns" ] || continue
		last=$(sed -n 's/^NSpid:.*[[:space:]]\([0-9]*\)$/\1/p' "$f/status" 2>/dev/null)
		[ "$last" = "$2" ] && { echo "${f#/proc/}"; return 0; }
	done
	return 1
}

# ct_check_memhog NAME ID SHARE: SIGUSR1 each memhog of the container (its
# pids in SHARE/ready.* are the container's); each checks every word of its
# memory and writes SHARE/result.NSPID (collect_results).
ct_check_memhog() {
	local name=$1 init nspid hpid
	init=$(ct_field "$2" pid)
	rm -f "$3"/result.*
	for nspid in $(memhog_pids "$3"); do
		hpid=$(ct_host_pid "$init" "$nspid") || { fail "$name" "memhog $nspid is not in container $2"; return 1; }
		kill -USR1 "$hpid" || { fail "$name" "memhog $nspid (host pid $hpid): kill failed"; return 1; }
	done
	collect_results "$name" "$3"
}

# migrate NAME SRC DST ARGS...: scripts/migrate-runc.sh SRC DST ARGS, bounded,
# its output in MIGRATE_LOG; PASS/FAIL NAME-migrate.
MIGRATE_LOG=''
migrate() {
	local name=$1 src=$2 dst=$3
	shift 3
	RUNC_IDS+=("$dst")
	MIGRATE_LOG=$BUILD/test-work/$name.migrate.log
	if run_bounded -o "$MIGRATE_LOG" "${MIGRATE_BOUND:-240}" "migrate-runc.sh $src $dst ($name)" "$MIGRATE_LOG" \
		"$MIGRATE" --root "$RUNC_ROOT" --criu "$CRIU" --lazyrestore "$LAZYRESTORE" --timeout 180 "$@" "$src" "$dst"; then
		pass "$name-migrate"
		sed 's/^/    /' "$MIGRATE_LOG"
	else
		fail "$name-migrate" "$(tail -n1 "$MIGRATE_LOG")"
		sed 's/^/    /' "$MIGRATE_LOG"
		return 1
	fi
}

# _ct_dead PID PIDNS: PID is no longer the process it was (gone, or a
# zombie: killed, its reaping up to whoever inherited it).
_ct_dead() {
	[ "$(readlink "/proc/$1/ns/pid" 2>/dev/null)" = "$2" ] || return 0
	[ "$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null)" = Z ]
}

# migrate_split NAME SRC DST WORKDIR ARGS...: the two-host flow on one host:
# `migrate-runc.sh --role source` in the background, its --copy (a script
# standing in for rsync) copies the images to WORKDIR/dst-img and marks them
# handed over, then `--role destination` restores from that copy.  ARGS go
# to both sides (--mode, --port...).  PASS/FAIL NAME-migrate.
migrate_split() {
	local name=$1 src=$2 dst=$3 v=$4 spid rc src_rc
	shift 4
	RUNC_IDS+=("$dst")
	MIGRATE_LOG=$v/destination.log
	printf '#!/bin/bash\ncp -a "$1/." "$2/" && touch "$2/../handed-over"\n' >"$v/handover.sh"
	chmod +x "$v/handover.sh"
	mkdir -p "$v/dst-img"
	local common=(--root "$RUNC_ROOT" --criu "$CRIU" --lazyrestore "$LAZYRESTORE" --timeout 180 "$@")
	bounded_start -o "$v/source.log" "migrate-runc.sh --role source ($name)" "$v/source.log" \
		"$MIGRATE" "${common[@]}" --role source --images "$v/img" --dst-images "$v/dst-img" \
		--copy "$v/handover.sh" "$src" "$dst"
	spid=$BOUNDED_PID
	wait_until 60 "the source side handing the images over ($name)" "$v/source.log" test -e "$v/handed-over"
	run_bounded -o "$MIGRATE_LOG" 240 "migrate-runc.sh --role destination ($name)" "$MIGRATE_LOG" \
		"$MIGRATE" "${common[@]}" --role destination --dst-images "$v/dst-img" "$src" "$dst"
	rc=$?
	bounded_wait 240 "$spid"
	src_rc=$?
	if [ $rc -eq 0 ] && [ $src_rc -eq 0 ]; then
		pass "$name-migrate"
	else
		fail "$name-migrate" "source: $(tail -n1 "$v/source.log"); destination: $(tail -n1 "$MIGRATE_LOG")"
	fi
	sed 's/^/    source: /' "$v/source.log"
	sed 's/^/    destination: /' "$MIGRATE_LOG"
	[ $rc -eq 0 ]
}

# ct_gone NAME ID PID PIDNS: after the migration the source container is
# gone: runc knows it no more, and its init (host PID in pid namespace
# PIDNS, readlink of /proc/PID/ns/pid before) is dead within 10 s.
ct_gone() {
	if rc_runc state "$2" >/dev/null 2>&1; then
		fail "$1-source-gone" "runc still has $2 ($(ct_field "$2" status))"
	elif ! _bound_poll 10 _ct_dead "$3" "$4"; then
		fail "$1-source-gone" "$2's init (pid $3) still runs 10 s after the migration"
	else
		pass "$1-source-gone"
	fi
}

# lazy_pages_left NAME LOG: the restore left pages to a daemon (else it was eager)
lazy_pages_left() {
	local n
	n=$(nr_lazy "$2")
	if [ "$n" -gt 0 ]; then
		pass "$1-lazy"
	else
		fail "$1-lazy" "the restore left no page to the daemon (no nr_lazy in $2)"
	fi
}
