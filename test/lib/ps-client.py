#!/usr/bin/python3
"""A tiny CRIU page-server client for tests: sends requests, reports answers.
usage: ps-client.py PORT REQUEST...   REQUEST = get:PID:VADDR:NR | close | raw:HEX | short
Prints one line per answer: "add_f VADDR NR SHA256" or "status N" or "eof"."""
import hashlib, socket, struct, sys

PS_IOV_GET, PS_IOV_CLOSE = 7, 0x1023
sk = socket.create_connection(("127.0.0.1", int(sys.argv[1])))


def recv_exact(n):
    buf = b""
    while len(buf) < n:
        chunk = sk.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


for req in sys.argv[2:]:
    kind, *args = req.split(":")
    if kind == "get":
        pid, vaddr, nr = int(args[0]), int(args[1], 0), int(args[2])
        sk.sendall(struct.pack("=IIQQ", PS_IOV_GET, nr, vaddr, pid))
        hdr = recv_exact(24)
        if hdr is None:
            print("eof")
            break
        cmd, n, va, _ = struct.unpack("=IIQQ", hdr)
        data = recv_exact(n * 4096)
        if data is None:
            print("eof")
            break
        print("add_f %#x %#x %d %s" % (cmd, va, n, hashlib.sha256(data).hexdigest()))
    elif kind == "close":
        sk.sendall(struct.pack("=IIQQ", PS_IOV_CLOSE, 0, 0, 0))
        st = recv_exact(4)
        print("status %d" % struct.unpack("=i", st)[0] if st else "eof")
    elif kind == "raw":
        sk.sendall(bytes.fromhex(args[0]))
        print("eof" if recv_exact(1) is None else "data")
    elif kind == "short":
        sk.sendall(b"\x07\x00\x00")
sk.close()
