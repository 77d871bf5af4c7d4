#!/bin/bash
# shellcheck disable=SC2034 # sets variables for the scripts that source it
# Helpers for the network tests (test/cases/5[1-9]-*.sh).  Source after common.sh.

# free_port: a TCP port nobody listens on now (other engineers' tests run at the same time)
free_port() {
	/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_ps DIR NAME [ARGS...]: our page server for DIR/img on a free loopback port
# (or $PORT if set), log in DIR/ps-NAME.log; sets $port and $spid.
start_ps() {
	local d=$1 name=$2
	shift 2
	rm -f "$d/st.$name"
	mkfifo "$d/st.$name"
	port=${PORT:-0}
	"$LAZYRESTORE" page-server -D "$d/img" --port "$port" -o "$d/ps-$name.log" -v4 \
		--status-fd 3 "$@" 3>"$d/st.$name" >"$d/ps-$name.out" 2>&1 &
	spid=$!
	head -c1 "$d/st.$name" >/dev/null
	rm -f "$d/st.$name"
	[ "$port" = 0 ] && port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$d/ps-$name.out")
	[ -n "$port" ]
}

# ps_exit: the page server's exit status (waits up to 30 s, then kills it)
ps_exit() {
	local n=300
	while kill -0 "$spid" 2>/dev/null && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
	kill "$spid" 2>/dev/null
	wait "$spid"
	local rc=$?
	spid=
	return $rc
}

# make_certs DIR: a CA, a certificate for 127.0.0.1 it signed (both sides use it, as
# criu's tests do), and a second CA with a certificate of its own (a stranger).
make_certs() {
	local c=$1/pki
	mkdir -p "$c"
	(
		cd "$c" || exit 1
		for ca in ca other-ca; do
			openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=lazyrestore test $ca" \
				-keyout "$ca-key.pem" -out "$ca.pem" -addext basicConstraints=critical,CA:TRUE \
				-addext keyUsage=critical,keyCertSign,cRLSign || exit 1
		done
		printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' >ext.cnf
		for who in peer:ca stranger:other-ca; do
			openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "${who%%:*}-key.pem" \
				-out "${who%%:*}.csr" || exit 1
			openssl x509 -req -in "${who%%:*}.csr" -CA "${who#*:}.pem" -CAkey "${who#*:}-key.pem" \
				-CAcreateserial -days 2 -extfile ext.cnf -out "${who%%:*}.pem" || exit 1
		done
	) >"$c/openssl.log" 2>&1
}

# tls_args DIR WHO: criu's --tls options for the certificate WHO (peer, stranger)
tls_args() {
	local c=$1/pki
	echo "--tls --tls-cacert $c/ca.pem --tls-cert $c/$2.pem --tls-key $c/$2-key.pem"
}

# stock_remote_restore NAME DIR PORT [CRIU-ARGS...]: stock `criu lazy-pages --page-server`
# from 127.0.0.1:PORT (with CRIU-ARGS, e.g. --tls ...) and `criu restore --lazy-pages -d`
# of DIR/img; the memhogs of DIR are checked as NAME, and the client's exit as NAME-exit.
stock_remote_restore() {
	local name=$1 d=$2 p=$3 lpid
	shift 3
	rm -f "$d/st.$name" && mkfifo "$d/st.$name"
	"$CRIU" lazy-pages -D "$d/img" --page-server --address 127.0.0.1 --port "$p" "$@" -o "lazy-$name.log" -v4 \
		--status-fd 3 3>"$d/st.$name" &
	lpid=$!
	head -c1 "$d/st.$name" >/dev/null
	rm -f "$d/st.$name"
	if "$CRIU" restore -D "$d/img" --lazy-pages -d -o "restore-$name.log" -v4; then
		check_memhog "$name" "$d"
	else
		fail "$name" "criu restore failed: $(grep -m1 Error "$d/img/restore-$name.log")"
	fi
	wait "$lpid" && pass "$name-exit" || fail "$name-exit" "criu lazy-pages: $(grep -m1 Error "$d/img/lazy-$name.log")"
}

# bad_ps PORTFILE MODE: a hostile page server on a free loopback port for one client
# (port written to PORTFILE once listening).  With MODE 'later-X' it answers the first
# GET correctly (zero pages), then misbehaves as X says: wrong-vaddr, wrong-pid,
# too-many, zero-pages, garbage, bad-cmd, extra (an answer nobody asked for, after a
# good one), cut (EOF inside the pages).
bad_ps() {
	/usr/bin/python3 - "$@" <<'PY'
import socket
import struct
import sys

HDR = struct.Struct("<IIQQ")
ADD_F = 6 | (4 << 16)


def recv_all(c, n):
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x:
            raise EOFError
        b += x
    return b


def main():
    portfile, mode = sys.argv[1], sys.argv[2]
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    import os
    os.rename(portfile + ".tmp", portfile)
    c, _ = s.accept()
    good = 1 if mode.startswith("later-") else 0
    mode = mode.replace("later-", "")
    try:
        while True:
            cmd, nr, vaddr, pid = HDR.unpack(recv_all(c, HDR.size))
            if good > 0:
                good -= 1
                c.sendall(HDR.pack(ADD_F, nr, vaddr, pid) + b"\0" * 4096 * nr)
                if mode == "extra":
                    c.sendall(HDR.pack(ADD_F, 1, vaddr, pid) + b"\0" * 4096)
                continue
            if mode == "wrong-vaddr":
                c.sendall(HDR.pack(ADD_F, nr, vaddr + 4096, pid) + b"\0" * 4096 * nr)
            elif mode == "wrong-pid":
                c.sendall(HDR.pack(ADD_F, nr, vaddr, pid + 1) + b"\0" * 4096 * nr)
            elif mode == "too-many":
                c.sendall(HDR.pack(ADD_F, nr + 1, vaddr, pid) + b"\0" * 4096 * (nr + 1))
            elif mode == "zero-pages":
                c.sendall(HDR.pack(ADD_F, 0, vaddr, pid))
            elif mode == "garbage":
                c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            elif mode == "bad-cmd":
                c.sendall(HDR.pack(1, nr, vaddr, pid) + b"\0" * 4096 * nr)
            elif mode == "cut":
                c.sendall(HDR.pack(ADD_F, nr, vaddr, pid) + b"\0" * 100)
                c.shutdown(socket.SHUT_WR)
                while c.recv(1 << 20):
                    pass
                return
            c.recv(1 << 20)
            return
    except (EOFError, ConnectionError):
        pass


main()
PY
}

# lazy_dump DIR MIB [CRIU-DUMP-ARGS...]: a memhog of MIB MiB started in DIR and dumped to
# DIR/img by lazy_dump_pid (-v4); sets $pid (the memhog), $P (the port) and $dpid (the dump).
lazy_dump() {
	local d=$1 mb=$2
	shift 2
	pid=$(start_memhog "$d" -m "$mb" -t 1) || return 1
	lazy_dump_pid "$pid" "$d" -v4 "$@"
}

# lazy_dump_pid PID DIR [CRIU-DUMP-ARGS...]: the tree of PID dumped to DIR/img by `criu dump
# --lazy-pages` on a free loopback port, which keeps the tree frozen and serves its lazy
# pages in the background; sets $P (the port) and $dpid (the dump).  1 if it does not
# listen within 20 s.
lazy_dump_pid() {
	local p=$1 d=$2 n=100
	shift 2
	P=$(free_port)
	mkdir -p "$d/img"
	bounded_start "criu dump --lazy-pages of $p" "$d/img/dump.log" \
		"$CRIU" dump -t "$p" -D "$d/img" --lazy-pages --address 127.0.0.1 --port "$P" -o dump.log "$@"
	dpid=$BOUNDED_PID
	until ss -Hltn "sport = :$P" | grep -q LISTEN; do
		n=$((n - 1))
		[ $n -gt 0 ] && kill -0 "$dpid" 2>/dev/null || return 1
		sleep 0.2
	done
}

# lazy_dump_ok DIR: the lazy dump of DIR ended well (every page asked for and sent)
lazy_dump_ok() {
	bounded_wait 60 "$dpid" && grep -q "Lazy pages transfer finished successfully" "$1/img/dump.log"
}

# ns_restore NAME DIR PID LAZY-PAGES-COMMAND...: in a pid namespace of its own (the frozen
# dumped tree keeps its pids until every page is served), the lazy-pages daemon (started
# with --status-fd 3 added, in DIR/img) and `criu restore --lazy-pages -d` of DIR/img; then
# the restored memhog PID checks every word.  Prints the memhog's result line ("OK N" or
# "BAD ..."), or "restore failed", then "lazy-pages exit N".  With NS_AFTER_RESTORE=CMD,
# CMD (a shell line) runs in the namespace between the restore and the check.
ns_restore() {
	local name=$1 d=$2 pid=$3 s
	shift 3
	s=$d/inns-$name.sh
	{
		echo '#!/bin/bash'
		printf 'cd %q || exit 1\n' "$d/img"
		printf 'rm -f st.%s && mkfifo st.%s\n' "$name" "$name"
		printf '%q ' "$@"
		printf -- '--status-fd 3 3>st.%s &\n' "$name"
		echo 'lp=$!'
		printf 'head -c1 st.%s >/dev/null\n' "$name"
		printf '%q restore -D %q --lazy-pages -d -o restore-%s.log -v4 || { echo "restore failed"; kill -9 $lp; exit 1; }\n' \
			"$CRIU" "$d/img" "$name"
		echo "${NS_AFTER_RESTORE:-:}"
		printf 'rm -f %q; kill -USR1 %s\n' "$d/result.$pid" "$pid"
		printf 'for i in $(seq 600); do [ -e %q ] || ! kill -0 %s 2>/dev/null && break; sleep 0.1; done\n' \
			"$d/result.$pid" "$pid"
		printf 'cat %q 2>/dev/null || echo "no result: the memhog is %s"\n' "$d/result.$pid" \
			'$(kill -0 '"$pid"' 2>/dev/null && echo alive || echo gone)'
		echo 'wait $lp; echo "lazy-pages exit $?"'
	} >"$s"
	chmod +x "$s"
	run_bounded -o "$d/inns-$name.out" 150 "a restore in a pid namespace ($name)" "$d/img/restore-$name.log" \
		unshare -pf --mount-proc "$s"
	cat "$d/inns-$name.out"
}

# scribble_lazy SRC DST: DST becomes a copy of the dump SRC whose lazy pages are
# overwritten with 0x5a bytes in its pages files: a restore from DST is right only if
# every lazy page came from elsewhere (a page server of SRC).
scribble_lazy() {
	rm -rf "$2" && cp -a "$1" "$2" || return 1
	local pm
	for pm in "$2"/pagemap-*.img; do
		"$BUILD/criu/crit" decode -i "$pm" | /usr/bin/python3 -c '
import json, sys
entries = json.load(sys.stdin)["entries"]
off = 0
with open(sys.argv[1] + "/pages-%d.img" % entries[0]["pages_id"], "r+b") as f:
    for e in entries[1:]:
        fl = e.get("flags", 4)
        n = e["nr_pages"] * 4096
        if fl & 4:
            if fl & 2:
                f.seek(off)
                f.write(b"\x5a" * n)
            off += n
' "$2" || return 1
	done
}
