#!/bin/bash
# migrate-runc.sh: move a running runc container to a new one, its memory
# following lazily.  One host stands in for two; what differs on two hosts
# is an option (see --help and docs/container-migration.md).
set -uo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
ME=migrate-runc

usage() {
	cat <<'EOF'
usage: scripts/migrate-runc.sh [OPTIONS] SRC_ID DST_ID

Checkpoint the running runc container SRC_ID with the patched criu, hand its
images over, and restore them as the container DST_ID whose memory comes
lazily (userfaultfd): DST_ID runs as soon as its process tree is back, its
pages follow on demand and in the background.  runc destroys SRC_ID once
the checkpoint is complete.  The script then waits until every page is
resident at the destination and SRC_ID is gone, checks both, and exits 0
only if all went right.

Modes (--mode):
  remote   (default) post-copy: `runc checkpoint --lazy-pages --page-server
           ADDR:PORT`.  The images hold no lazy page; SRC_ID stays frozen and
           its dump serves the pages over TCP until the destination has them
           all.  The destination's daemon fetches them from ADDR:PORT.
  images   `runc checkpoint` writes every page into the images, which are
           handed over whole; DST_ID is still restored lazily, its pages
           served from the images' pages files.
  eager    plain `runc checkpoint` and `runc restore`: no lazy pages at all
           (the baseline).

Who serves the lazy pages at the destination (--daemon):
  stock    `criu lazy-pages` of --criu (with --page-server in remote mode)
  ours     `lazyrestore lazy-pages` (with --page-server in remote mode)
  plugin   no daemon started here: `runc restore` runs `criu swrk`, and the
           CRIU plugin (lazyrestore.so in --plugin-dir) starts the daemon
           itself.  RPC restores hide --lazy-pages from plugins, so this sets
           LAZYRESTORE_PLUGIN=on (and LAZYRESTORE_PAGE_SERVER=ADDR:PORT in
           remote mode, where the plugin starts `lazyrestore lazy-pages
           --page-server`).

options:
  --mode remote|images|eager   see above (default remote)
  --daemon stock|ours|plugin   see above (default ours)
  --address ADDR         the address SRC's page server listens on and the
                         destination connects to (default 127.0.0.1; on two
                         hosts: the source host's address on the link)
  --port PORT            its TCP port (default: a free one from 27100 up)
  --images DIR           where `runc checkpoint` writes the images (default: a
                         new directory under /var/tmp, removed after a
                         successful migration unless --keep or --no-wait)
  --dst-images DIR       the destination's copy of the images (default: the
                         same directory: one host)
  --copy CMD             how the images reach --dst-images, run as
                         `CMD SRC_IMAGES DST_IMAGES` once they are complete
                         (remote mode: as soon as the dump serves pages);
                         default `cp -a`, used only when the directories
                         differ.  On two hosts e.g. a script around rsync.
  --work DIR             the restore's work directory (restore.log, the daemon's
                         log, lazy-pages.socket; default: --dst-images)
  --bundle DIR           DST_ID's bundle (default: SRC_ID's bundle, from
                         `runc state`); its config.json must be SRC_ID's
  --role both|source|destination
                         both (default): the whole migration here; source:
                         checkpoint, copy, and wait for the transfer to end;
                         destination: daemon, restore and wait, with images
                         already in --dst-images (and, in remote mode, the
                         source serving on ADDR:PORT)
  --root DIR             runc's state directory (runc --root; default runc's)
  --runc PATH            the runc binary (default: runc in PATH)
  --criu PATH            the criu binary runc runs (default build/criu/criu,
                         the patched one, else criu in PATH)
  --lazyrestore PATH     default build/lazyrestore, else lazyrestore in PATH
  --plugin-dir DIR       criu's plugin directory for --daemon plugin (default
                         build/lib, else criu's own)
  --timeout SECS         bound of each step (default 300)
  --times FILE           append the step times (seconds since the epoch):
                         checkpoint_start, images_ready, restore_start,
                         restore_done, resident, source_gone
  --no-wait              return as soon as DST_ID runs (nothing is checked
                         after that; the daemon and runc checkpoint go on)
  --keep                 keep the default images directory (and its logs)
  -h, --help             this text

Exit status: 0 when DST_ID runs, every page reached it and SRC_ID is gone;
1 on any failure (one line says which step, with its log); 2 on bad usage.
Logs: dump.log in --images, restore.log and the daemon's log in --work,
runc's own in WORK/runc-*.log.
EOF
}

die_usage() {
	echo "$ME: $*" >&2
	echo "try: scripts/migrate-runc.sh --help" >&2
	exit 2
}
say() { echo "$ME: $*"; }
now() { echo "${EPOCHREALTIME/,/.}"; }

mode=remote daemon='' address=127.0.0.1 port='' images='' dst_images='' copy='' work=''
bundle='' role=both root='' runc_bin=runc criu='' lazyrestore='' plugin_dir='' timeout=300
times='' wait=1 keep=0 made_images=0
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) usage; exit 0 ;;
	--no-wait) wait=0; shift; continue ;;
	--keep) keep=1; shift; continue ;;
	--mode | --daemon | --address | --port | --images | --dst-images | --copy | --work | --bundle | \
		--role | --root | --runc | --criu | --lazyrestore | --plugin-dir | --timeout | --times)
		[ $# -ge 2 ] || die_usage "$1 needs a value"
		;;
	--) shift; break ;;
	-*) die_usage "unknown option $1" ;;
	*) break ;;
	esac
	case $1 in
	--mode) mode=$2 ;;
	--daemon) daemon=$2 ;;
	--address) address=$2 ;;
	--port) port=$2 ;;
	--images) images=$2 ;;
	--dst-images) dst_images=$2 ;;
	--copy) copy=$2 ;;
	--work) work=$2 ;;
	--bundle) bundle=$2 ;;
	--role) role=$2 ;;
	--root) root=$2 ;;
	--runc) runc_bin=$2 ;;
	--criu) criu=$2 ;;
	--lazyrestore) lazyrestore=$2 ;;
	--plugin-dir) plugin_dir=$2 ;;
	--timeout) timeout=$2 ;;
	--times) times=$2 ;;
	esac
	shift 2
done
[ $# -eq 2 ] || die_usage "want SRC_ID DST_ID (got $# arguments)"
src=$1 dst=$2
[ "$src" != "$dst" ] || die_usage "SRC_ID and DST_ID must differ (the source exists until the transfer ends)"
case $mode in remote | images | eager) ;; *) die_usage "--mode $mode: remote, images or eager" ;; esac
[ -n "$daemon" ] || daemon=ours
case $daemon in stock | ours | plugin) ;; *) die_usage "--daemon $daemon: stock, ours or plugin" ;; esac
case $role in both | source | destination) ;; *) die_usage "--role $role: both, source or destination" ;; esac
[[ $timeout =~ ^[1-9][0-9]*$ ]] || die_usage "--timeout $timeout: a number of seconds"
[ -z "$port" ] || [[ $port =~ ^[1-9][0-9]*$ && $port -lt 65536 ]] || die_usage "--port $port: 1..65535"
[ "$mode" != remote ] || [ "$role" = both ] || [ -n "$port" ] ||
	die_usage "--role $role in remote mode needs --port (both sides must agree on it)"
[ "$role" != destination ] || [ -n "$dst_images$images" ] || die_usage "--role destination needs --dst-images"

if [ -z "$criu" ]; then
	criu=$TOP/build/criu/criu
	[ -x "$criu" ] || criu=$(command -v criu) || die_usage "no criu: run make, or give --criu"
fi
if [ -z "$lazyrestore" ]; then
	lazyrestore=$TOP/build/lazyrestore
	[ -x "$lazyrestore" ] || lazyrestore=$(command -v lazyrestore) || lazyrestore=''
fi
if [ -z "$plugin_dir" ] && [ -e "$TOP/build/lib/lazyrestore.so" ]; then
	plugin_dir=$TOP/build/lib
fi
command -v "$runc_bin" >/dev/null || die_usage "no runc ($runc_bin): scripts/deps.sh installs Debian's"
RUNC=("$runc_bin")
[ -n "$root" ] && RUNC+=(--root "$root")
RUNC+=(--criu "$criu")

if [ "$mode" != eager ] && [ "$daemon" = ours ]; then
	[ -n "$lazyrestore" ] || die_usage "--daemon ours: no lazyrestore binary (run make, or give --lazyrestore)"
	# the whole text first: grep -q leaving early would kill the writer with SIGPIPE (pipefail)
	if [ "$mode" = remote ] && [ "$role" != source ] &&
		! grep -q -- '--page-server' <<<"$("$lazyrestore" lazy-pages --help 2>&1)"; then
		die_usage "--daemon ours in remote mode: $lazyrestore lazy-pages has no --page-server" \
			"(no remote page source yet); use --mode images, or --daemon stock"
	fi
fi
[ "$daemon" != plugin ] || [ "$mode" = eager ] || [ -n "$plugin_dir" ] ||
	die_usage "--daemon plugin: no lazyrestore.so (run make, or give --plugin-dir)"

state_field() { # ID FIELD: a string or number field of `runc state ID`
	"${RUNC[@]}" state "$1" 2>/dev/null | sed -n "s/^ *\"$2\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p"
}
if [ "$role" != destination ]; then
	st=$(state_field "$src" status)
	[ "$st" = running ] || { say "$src: not a running container (runc state: '${st:-none}')"; exit 1; }
fi
if [ "$role" != source ] && "${RUNC[@]}" state "$dst" >/dev/null 2>&1; then
	say "$dst: a container of that name exists already"
	exit 1
fi

if [ -z "$images" ]; then
	if [ "$role" = destination ]; then
		images=$dst_images
	else
		images=$(mktemp -d /var/tmp/migrate-runc.XXXXXX) || exit 1
		made_images=1
	fi
fi
dst_images=${dst_images:-$images}
work=${work:-$dst_images}
mkdir -p "$images" "$dst_images" "$work" || exit 1
images=$(cd "$images" && pwd) dst_images=$(cd "$dst_images" && pwd) work=$(cd "$work" && pwd)

stamp() { [ -n "$times" ] && echo "$1 $(now)" >>"$times"; return 0; }

# ---- status bytes: criu's --status-fd through a fifo held open here -------
# status_open NAME: a fifo in WORK, read-write here so nothing blocks; sets SFD.
SFD=''
status_open() {
	local f=$work/.$1-status.$$
	rm -f "$f" && mkfifo "$f" && exec {SFD}<>"$f" && STATUS_FIFO=$f
}
# status_wait PID STEP: 0 once the byte came, 1 if PID ended first or after --timeout.
status_wait() {
	local pid=$1 end=$((SECONDS + timeout))
	until read -r -t 0 -u "$SFD"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			read -r -t 0 -u "$SFD" && break
			say "$2 ended before it was ready"
			return 1
		fi
		[ $SECONDS -lt $end ] || { say "$2 not ready after ${timeout}s"; return 1; }
		sleep 0.005
	done
	exec {SFD}<&-
	rm -f "$STATUS_FIFO"
}

# wait_pid PID STEP: its exit status; killed after --timeout (status 124).
wait_pid() {
	local pid=$1 end=$((SECONDS + timeout))
	while kill -0 "$pid" 2>/dev/null; do
		if [ $SECONDS -ge $end ]; then
			say "$2 still running after ${timeout}s: killed"
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			return 124
		fi
		sleep 0.01
	done
	wait "$pid"
}

# first_error LOG: its first error line (but criu's harmless one when it may
# not raise RLIMIT_NOFILE), else its last line
first_error() {
	grep -E 'Error|error' "$1" 2>/dev/null | grep -m1 -v 'RLIMIT_NOFILE for self' ||
		tail -n1 "$1" 2>/dev/null
}

free_port() {
	local p
	for p in $(seq 27100 27199); do
		ss -Hltn "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return 0; }
	done
	return 1
}

CK_PID=''
cleanup() {
	if [ -n "$CK_PID" ] && kill -0 "$CK_PID" 2>/dev/null; then
		say "stopping runc checkpoint ($CK_PID); $src stays as criu left it: see 'runc state $src'"
		kill -TERM "$CK_PID" 2>/dev/null
	fi
	return 0
}
trap cleanup EXIT

# ---- source: checkpoint ----------------------------------------------------
source_start() {
	[ -n "$bundle" ] || bundle=$(state_field "$src" bundle)
	local args=(checkpoint --image-path "$images" --work-path "$images")
	if [ "$mode" = remote ]; then
		port=${port:-$(free_port)} || { say "no free port in 27100..27199"; return 1; }
		status_open checkpoint || return 1
		args+=(--lazy-pages --page-server "$address:$port" --status-fd 9)
	fi
	say "checkpoint $src into $images ($mode${port:+, pages on $address:$port})"
	stamp checkpoint_start
	if [ "$mode" = remote ]; then
		timeout -k 5 "$timeout" "${RUNC[@]}" "${args[@]}" "$src" 9>"$STATUS_FIFO" \
			</dev/null >"$images/runc-checkpoint.log" 2>&1 &
		CK_PID=$!
		status_wait "$CK_PID" "runc checkpoint --lazy-pages" ||
			{ say "runc checkpoint failed: $(first_error "$images/dump.log") (runc: $(tail -n1 "$images/runc-checkpoint.log"))"; return 1; }
	else
		timeout -k 5 "$timeout" "${RUNC[@]}" "${args[@]}" "$src" </dev/null >"$images/runc-checkpoint.log" 2>&1 ||
			{ say "runc checkpoint failed: $(first_error "$images/dump.log") (runc: $(tail -n1 "$images/runc-checkpoint.log"))"; return 1; }
	fi
	stamp images_ready
	if [ "$images" != "$dst_images" ]; then
		say "images to $dst_images (${copy:-cp -a})"
		if [ -n "$copy" ]; then
			bash -c "$copy \"\$1\" \"\$2\"" copy "$images" "$dst_images" || { say "--copy failed"; return 1; }
		else
			cp -a "$images/." "$dst_images/" || { say "cp -a failed"; return 1; }
		fi
	fi
}

# source_end: the checkpoint ends (remote: once every page is served) and SRC is gone.
source_end() {
	if [ -n "$CK_PID" ]; then
		wait_pid "$CK_PID" "runc checkpoint (the page transfer)" ||
			{ say "runc checkpoint failed: $(first_error "$images/dump.log")"; CK_PID=''; return 1; }
		CK_PID=''
	fi
	if "${RUNC[@]}" state "$src" >/dev/null 2>&1; then
		say "$src still exists after its checkpoint (status $(state_field "$src" status))"
		return 1
	fi
	stamp source_gone
	say "$src is gone"
}

# ---- destination: daemon, restore ----------------------------------------
DAEMON_PID='' PLUGIN_ENV=()
daemon_start() {
	local bin cmd=()
	[ "$mode" = eager ] && return 0
	case $daemon in
	plugin)
		PLUGIN_ENV=(CRIU_LIBS_DIR="$plugin_dir" LAZYRESTORE_PLUGIN=on LAZYRESTORE_LOG=lazyrestore.log)
		[ "$mode" = remote ] && PLUGIN_ENV+=(LAZYRESTORE_PAGE_SERVER="$address:$port")
		return 0
		;;
	stock) bin=$criu ;;
	ours) bin=$lazyrestore ;;
	esac
	cmd=("$bin" lazy-pages --images-dir "$dst_images" --work-dir "$work" --log-file "lazy-pages-$daemon.log")
	[ "$mode" = remote ] && cmd+=(--page-server --address "$address" --port "$port")
	[ "$daemon" = ours ] && cmd+=(--stats "$work/stats-ours.json")
	status_open daemon || return 1
	"${cmd[@]}" --status-fd 9 9>"$STATUS_FIFO" </dev/null >"$work/lazy-pages-$daemon.out" 2>&1 &
	DAEMON_PID=$!
	status_wait "$DAEMON_PID" "$(basename "$bin") lazy-pages" ||
		{ say "$(basename "$bin") lazy-pages: $(first_error "$work/lazy-pages-$daemon.log")"; return 1; }
}

restore() {
	local args=(restore -d --image-path "$dst_images" --work-path "$work" --bundle "$bundle")
	[ "$mode" = eager ] || args+=(--lazy-pages)
	say "restore $dst as $mode$([ "$mode" = eager ] || echo " ($daemon)") from $dst_images, bundle $bundle"
	stamp restore_start
	if ! env "${PLUGIN_ENV[@]}" timeout -k 5 "$timeout" "${RUNC[@]}" "${args[@]}" "$dst" \
		</dev/null >"$work/runc-restore.log" 2>&1; then
		say "runc restore failed: $(first_error "$work/restore.log") (runc: $(tail -n1 "$work/runc-restore.log"))"
		return 1
	fi
	stamp restore_done
	local status
	status=$(state_field "$dst" status)
	[ "$status" = running ] || { say "$dst is '$status' after runc restore, not running"; return 1; }
	say "$dst runs (pid $(state_field "$dst" pid))"
}

# resident: the daemon exits 0 once every page is in.
resident() {
	local rc pid log
	[ "$mode" = eager ] && { stamp resident; return 0; }
	if [ "$daemon" = plugin ]; then
		pid=$(sed -n 's/.*lazyrestore.so: .* lazy-pages (pid \([0-9]*\)) listens.*/\1/p' "$work/restore.log" | tail -n1)
		[ -n "$pid" ] || { say "the plugin started no daemon: $(grep -m1 lazyrestore.so "$work/restore.log")"; return 1; }
		local end=$((SECONDS + timeout))
		while [ -e "/proc/$pid" ] && [ $SECONDS -lt $end ]; do sleep 0.01; done
		[ -e "/proc/$pid" ] && { say "the plugin's daemon $pid still runs after ${timeout}s"; return 1; }
		log=$work/lazyrestore.log
		# criu's own lazy-pages logs no exit status; ours ends its log with it
		if [ "$mode" = images ] && ! grep -q 'lazy-pages: exit 0' "$log"; then
			say "the plugin's daemon failed: $(first_error "$log")"
			return 1
		fi
		if [ "$mode" = remote ] && grep -q 'Error' "$log"; then
			say "the plugin's criu lazy-pages failed: $(first_error "$log")"
			return 1
		fi
	else
		wait_pid "$DAEMON_PID" "the $daemon lazy-pages daemon"
		rc=$?
		DAEMON_PID=''
		[ $rc -eq 0 ] || { say "the $daemon daemon exited $rc: $(first_error "$work/lazy-pages-$daemon.log")"; return 1; }
	fi
	stamp resident
	say "every page of $dst is resident"
}

ok=0
case $role in
source)
	source_start && source_end && ok=1
	;;
destination)
	if [ -z "$bundle" ]; then
		say "--role destination needs --bundle (DST_ID's bundle)"
		exit 2
	fi
	if daemon_start && restore; then
		if [ $wait = 0 ] || resident; then ok=1; fi
	fi
	;;
both)
	if source_start && daemon_start && restore; then
		if [ $wait = 0 ]; then
			CK_PID='' # goes on by itself
			ok=1
		elif resident && source_end; then
			ok=1
		fi
	fi
	;;
esac
[ -n "$DAEMON_PID" ] && [ $ok = 0 ] && kill -TERM "$DAEMON_PID" 2>/dev/null
if [ $ok = 1 ]; then
	if [ $made_images = 1 ] && [ $keep = 0 ] && [ $wait = 1 ] && [ "$dst_images$work" = "$images$images" ]; then
		rm -rf "$images"
	fi
	say "done"
	exit 0
fi
[ $made_images = 1 ] && say "images and logs kept in $images"
exit 1
