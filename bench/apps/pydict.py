#!/usr/bin/python3
"""A python process holding a large dict, answering GETs for it.

pydict.py --port N --keys K --size S --pidfile FILE

Builds {b"key:<i>": value} for i < K, the value "value:<i>" zero-padded to S
bytes (as bench/apps/load.py fill writes it to redis), listens on
127.0.0.1:N, then writes its pid to FILE.  Speaks the part of redis'
protocol load.py uses: GET key (a bulk string, $-1 if missing) and PING, one
connection at a time.
"""
import argparse
import os
import socket


def serve(conn, d):
    f = conn.makefile("rb")
    while True:
        line = f.readline()
        if not line:
            return
        if not line.startswith(b"*"):
            conn.sendall(b"-ERR protocol\r\n")
            return
        args = []
        for _ in range(int(line[1:])):
            n = int(f.readline()[1:])
            args.append(f.read(n + 2)[:-2])
        cmd = args[0].upper() if args else b""
        if cmd == b"GET" and len(args) == 2:
            v = d.get(args[1])
            conn.sendall(b"$-1\r\n" if v is None else b"$%d\r\n%s\r\n" % (len(v), v))
        elif cmd == b"PING":
            conn.sendall(b"+PONG\r\n")
        else:
            conn.sendall(b"-ERR unknown command\r\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--keys", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--pidfile", required=True)
    a = p.parse_args()
    d = {b"key:%d" % i: (b"value:%d" % i)[:a.size].ljust(a.size, b"\0") for i in range(a.keys)}
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", a.port))
    ls.listen(16)
    with open(a.pidfile + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(a.pidfile + ".tmp", a.pidfile)
    while True:
        conn, _ = ls.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            serve(conn, d)
        except (OSError, ValueError):
            pass
        conn.close()


if __name__ == "__main__":
    main()
