#!/bin/bash
# timeout: 300
# TLS with criu's options and semantics, on our page server and our client.
# A client whose certificate the CA did not sign, a client with no
# certificate, and a plain-TCP client get no byte of memory (the server
# sends nothing before the handshake and the certificate check pass); our
# client refuses a plain server.  Interop: stock `criu lazy-pages
# --page-server --tls` restores a tree through our TLS page server.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/test/lib/net.sh"

d=$(scratch net-tls)
spid=
trap 'kill_memhogs "$d"; [ -n "$spid" ] && kill "$spid" 2>/dev/null' EXIT
make_certs "$d" || { fail net-tls-setup "openssl: $(tail -n2 "$d/pki/openssl.log")"; finish; }
pid=$(start_memhog "$d" -m 32 -f -t 1) && criu_dump "$pid" "$d/img" || { fail net-tls-setup "cannot dump memhog"; finish; }
read -r -a peer <<<"$(tls_args "$d" peer)"
read -r -a stranger <<<"$(tls_args "$d" stranger)"
ps_tls=("${peer[@]}" --address 127.0.0.1)

# 1. our client and server over TLS, both connections
start_ps "$d" ok --sessions 2 "${ps_tls[@]}"
out=$("$LAZYRESTORE" page-fetch -D "$d/img" --port "$port" "${peer[@]}" --urgent-channel --faults 100 2>&1)
rc=$?
echo "$out" | sed 's/^/    /'
ps_exit && [ $rc -eq 0 ] && [[ $out == *verified* ]] && grep -q "TLS handshake done, certificate verified" "$d/ps-ok.log" &&
	pass net-tls-ours || fail net-tls-ours "status $rc: $(echo "$out" | tail -n1); $(grep -m1 Error "$d/ps-ok.log")"

# refused: the server's log shows the reason and that the session served nothing
refused() { # NAME LOG-TEXT
	if grep -q "$2" "$d/ps-$1.log" && grep -q "0 requests, 0 pages sent to 127.0.0.1:.* (session failed)" "$d/ps-$1.log"; then
		pass "net-tls-$1"
	else
		fail "net-tls-$1" "server log: $(grep -m1 Error "$d/ps-$1.log")"
	fi
}

# 2. a certificate from another CA
start_ps "$d" stranger "${ps_tls[@]}"
out=$("$LAZYRESTORE" page-fetch -D "$d/img" --port "$port" "${stranger[@]}" 2>&1)
rc=$?
ps_exit
[ $rc -eq 1 ] && [[ $out != *verified* ]] && refused stranger "certificate is not valid" ||
	fail net-tls-stranger "client status $rc: $out"

# 3. no certificate at all (python's TLS client, CA only), asking for a page anyway
start_ps "$d" nocert "${ps_tls[@]}"
got=$(/usr/bin/python3 - "$port" "$d/pki/ca.pem" "$pid" <<'PY'
import socket, ssl, struct, sys
port, ca, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)
n = 0
try:
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1") as s:
        s.sendall(struct.pack("<IIQQ", 7, 1, 0x1000, pid))
        while True:
            b = s.recv(65536)
            if not b:
                break
            n += len(b)
except (ssl.SSLError, ConnectionError) as e:
    print("refused:", type(e).__name__, end="; ")
print("bytes", n)
PY
)
ps_exit
echo "    no certificate: $got"
[[ $got == *"bytes 0" ]] && refused nocert "tls: handshake" || fail net-tls-nocert "client got: $got"

# 4. plain TCP to the TLS server
start_ps "$d" plain "${ps_tls[@]}"
got=$(/usr/bin/python3 "$TOP/test/lib/ps-client.py" "$port" "get:$pid:0x1000:1" 2>&1)
ps_exit
[[ $got != *add_f* ]] && refused plain "tls: handshake" || fail net-tls-plain "client got: $got"

# 5. our TLS client to a plain server: the handshake fails, nothing is taken
start_ps "$d" plain-server
out=$("$LAZYRESTORE" page-fetch -D "$d/img" --port "$port" "${peer[@]}" 2>&1)
rc=$?
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
spid=
[ $rc -eq 1 ] && [[ $out == *"peer 127.0.0.1:$port: tls: handshake"* ]] && pass net-tls-client-refuses-plain ||
	fail net-tls-client-refuses-plain "status $rc: $out"

# 6. interop: stock criu lazy-pages over TLS through our server, a real restore
start_ps "$d" criu "${ps_tls[@]}"
stock_remote_restore net-tls-stock-criu-client "$d" "$port" "${peer[@]}"
ps_exit && grep -q "certificate verified" "$d/ps-criu.log" && pass net-tls-stock-criu-session ||
	fail net-tls-stock-criu-session "$(grep -m1 Error "$d/ps-criu.log")"
finish
