#!/usr/bin/python3
"""bad-ps.py PORTFILE MODE: a hostile page server on a free loopback port for one
client.  It answers the first GET correctly (zero pages of the asked size) when
MODE starts with 'later-', then misbehaves as MODE says:
  wrong-vaddr, wrong-pid, too-many, zero-pages, garbage, bad-cmd, extra (an answer
  nobody asked for, after a good one), cut (EOF inside the pages).
Writes its port to PORTFILE once listening."""
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
