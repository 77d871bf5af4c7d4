#!/usr/bin/python3
"""GET load on a redis-server the moment a restore returns.

getload.py --port P --keys N --size S --t0 T [--hot H] [--hot-share F] [--seconds D] [--seed X]
getload.py --fill --keys N --size S | redis-cli -p P --pipe

Connects to 127.0.0.1:P (retrying every millisecond, 30 s at most), then
sends GET key:<i> one at a time on one connection: with probability F
(default 0.9) i is one of the H hot keys (default 10000, a fixed random
subset), else any of the N keys.  Every reply must be the value --fill
wrote ("value:<i>" zero-padded to S bytes, as DEBUG POPULATE N key S would
write it, for key:<i>, i < N); a wrong reply
ends the run with status 1.  T is when the restore started
(time.monotonic() seconds of this host).  Prints one JSON line:
first_reply_s (from T to the first correct reply), then over the D seconds
(default 1.0) after that first reply: requests, p50_us, p99_us, max_us.
"""
import argparse
import json
import random
import socket
import sys
import time


def connect(port, deadline):
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


def read_reply(f):
    line = f.readline()
    if not line.startswith(b"$"):
        raise ValueError("reply %r" % line[:80])
    n = int(line[1:])
    if n < 0:
        return None
    data = f.read(n + 2)
    return data[:-2]


def fill(keys, size):
    out = sys.stdout.buffer
    for i in range(keys):
        k = b"key:%d" % i
        v = (b"value:%d" % i)[:size].ljust(size, b"\0")
        out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fill", action="store_true")
    p.add_argument("--port", type=int)
    p.add_argument("--keys", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--t0", type=float)
    p.add_argument("--hot", type=int, default=10000)
    p.add_argument("--hot-share", type=float, default=0.9)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=20)
    a = p.parse_args()
    if a.fill:
        return fill(a.keys, a.size)
    rnd = random.Random(a.seed)
    hot = [rnd.randrange(a.keys) for _ in range(min(a.hot, a.keys))]
    s = connect(a.port, time.monotonic() + 30)
    f = s.makefile("rb")
    lat, first, end = [], None, None
    while True:
        i = rnd.choice(hot) if rnd.random() < a.hot_share else rnd.randrange(a.keys)
        key = b"key:%d" % i
        t = time.monotonic()
        s.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key))
        v = read_reply(f)
        now = time.monotonic()
        want = (b"value:%d" % i)[: a.size]
        if v is None or len(v) != a.size or not v.startswith(want) or v[len(want):].strip(b"\0"):
            print("wrong reply for %s: %r" % (key.decode(), None if v is None else v[:40]), file=sys.stderr)
            return 1
        if first is None:
            first = now - a.t0
            end = now + a.seconds
            continue
        lat.append((now - t) * 1e6)
        if now >= end:
            break
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print(json.dumps({"first_reply_s": round(first, 6), "requests": len(lat), "p50_us": round(pick(0.5), 1),
                      "p99_us": round(pick(0.99), 1), "max_us": round(lat[-1], 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
