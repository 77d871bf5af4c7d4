#!/usr/bin/python3
"""Fill a key-value server, or restore it and put a GET load on it at once.

load.py fill --proto P --port N --keys K --size S
load.py run  --proto P --port N --keys K --size S [--seed X] [--seconds 1,10]
             [--bound B] [--hot H] [--hot-share F] [-- RESTORE COMMAND...]

P is resp (redis-server, pydict.py) or memcache (memcached).  Key i is
"key:<i>", its value "value:<i>" zero-padded to S bytes, i < K.

fill SETs every key through one pipelined connection and checks that the
server holds K keys afterwards.

run prepares the whole request sequence first, then (t0) runs the restore
command, waits for it (B seconds at most, default 60; its process group is
killed past that), and the moment it returns connects to 127.0.0.1:N
(retrying every 0.5 ms) and sends GETs one at a time on that connection:
with probability F (default 0.9) for one of the H hot keys (default 10000,
a fixed random subset), else for any key.  Every reply must be the value
fill wrote; a wrong reply ends the run with status 1.  Without a command, t0
is the connect (the program as it runs, never dumped).  Prints one JSON line:
restore_s (t0 to the command's exit), first_reply_s (t0 to the first correct
reply), and for each window W of --seconds (default 1,10): requests, p50_us,
p99_us, max_us of the requests sent in the first W seconds of the load (it
starts when the restore command returns; its first request is one of them,
however long its reply took).
"""
import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time


def value(i, size):
    return (b"value:%d" % i)[:size].ljust(size, b"\0")


def connect(port, deadline):
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.0005)


def resp_get(key):
    return b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key)


def resp_set(key, val):
    return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(val), val)


def resp_read(f):
    """A bulk string reply: bytes, or None for a missing key."""
    line = f.readline()
    if not line.startswith(b"$"):
        raise ValueError("reply %r" % line[:80])
    n = int(line[1:])
    if n < 0:
        return None
    return f.read(n + 2)[:-2]


def mc_get(key):
    return b"get %s\r\n" % key


def mc_read(f):
    """A get reply: the value, or None for a miss."""
    line = f.readline()
    if line == b"END\r\n":
        return None
    parts = line.split()
    if len(parts) != 4 or parts[0] != b"VALUE":
        raise ValueError("reply %r" % line[:80])
    data = f.read(int(parts[3]) + 2)[:-2]
    end = f.readline()
    if end != b"END\r\n":
        raise ValueError("no END after the value: %r" % end[:80])
    return data


PROTO = {"resp": (resp_get, resp_read), "memcache": (mc_get, mc_read)}


def fill(a):
    s = connect(a.port, time.monotonic() + 10)
    f = s.makefile("rb")
    chunk = 1000
    for lo in range(0, a.keys, chunk):
        hi = min(a.keys, lo + chunk)
        if a.proto == "resp":
            s.sendall(b"".join(resp_set(b"key:%d" % i, value(i, a.size)) for i in range(lo, hi)))
            for i in range(lo, hi):
                r = f.readline()
                if r != b"+OK\r\n":
                    raise ValueError("SET key:%d: %r" % (i, r[:80]))
        else:
            s.sendall(b"".join(b"set key:%d 0 0 %d noreply\r\n%s\r\n" % (i, a.size, value(i, a.size))
                               for i in range(lo, hi)))
    if a.proto == "resp":
        s.sendall(b"*1\r\n$6\r\nDBSIZE\r\n")
        n = int(f.readline()[1:])
    else:
        s.sendall(b"stats\r\n")
        st = {}
        while True:
            line = f.readline()
            if line in (b"END\r\n", b""):
                break
            p = line.split()
            st[p[1]] = p[2]
        n = int(st[b"curr_items"])
        if int(st[b"evictions"]):
            raise ValueError("memcached evicted %s items: give it more memory" % st[b"evictions"].decode())
    if n != a.keys:
        raise ValueError("the server holds %d keys after the fill, %d were set" % (n, a.keys))
    return 0


def restore(cmd, bound):
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        rc = p.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise RuntimeError("%s: still running after %d s, killed" % (cmd[0], bound))
    if rc:
        raise RuntimeError("%s exited with %d" % (cmd[0], rc))


def pick(lat, q):
    return round(lat[min(len(lat) - 1, int(q * len(lat)))], 1)


def run(a, cmd):
    send, read = PROTO[a.proto]
    windows = sorted(float(w) for w in a.seconds.split(","))
    rnd = random.Random(a.seed)
    hot = [rnd.randrange(a.keys) for _ in range(min(a.hot, a.keys))]
    # everything the loop needs is made before t0: the clock then runs for the restore and the server only
    n_pre = 200000
    seq = [rnd.choice(hot) if rnd.random() < a.hot_share else rnd.randrange(a.keys) for _ in range(n_pre)]
    reqs = [send(b"key:%d" % i) for i in seq]
    hot_vals = {i: value(i, a.size) for i in hot}
    t0 = time.monotonic()
    restore_s = None
    if cmd:
        restore(cmd, a.bound)
        restore_s = time.monotonic() - t0
    start = time.monotonic()  # the load starts: a window counts the requests sent in its first W seconds
    if not cmd:
        t0 = start
    s = connect(a.port, start + 30)
    f = s.makefile("rb")
    lat, first, k = [], None, 0
    while True:
        t = time.monotonic()
        if t - start >= windows[-1] and first is not None:
            break
        j = k % n_pre
        k += 1
        s.sendall(reqs[j])
        v = read(f)
        now = time.monotonic()
        i = seq[j]
        if v != (hot_vals.get(i) or value(i, a.size)):
            print("wrong reply for key:%d: %r" % (i, None if v is None else v[:40]), file=sys.stderr)
            return 1
        if first is None:
            first = now
        lat.append((t - start, (now - t) * 1e6))
    out = {"restore_s": None if restore_s is None else round(restore_s, 6), "first_reply_s": round(first - t0, 6)}
    for w in windows:
        ws = sorted(us for at, us in lat if at < w)
        tag = "%gs" % w
        out.update({"requests_" + tag: len(ws), "p50_us_" + tag: pick(ws, 0.5), "p99_us_" + tag: pick(ws, 0.99),
                    "max_us_" + tag: round(ws[-1], 1)})
    print(json.dumps(out))
    return 0


def main():
    argv = sys.argv[1:]
    cmd = []
    if "--" in argv:
        cmd = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("fill", "run"))
    p.add_argument("--proto", choices=sorted(PROTO), required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--keys", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--hot", type=int, default=10000)
    p.add_argument("--hot-share", type=float, default=0.9)
    p.add_argument("--seconds", default="1,10")
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--bound", type=int, default=60)
    a = p.parse_args(argv)
    try:
        return fill(a) if a.what == "fill" else run(a, cmd)
    except (OSError, ValueError, RuntimeError) as e:
        print("load.py %s (%s, port %d): %s" % (a.what, a.proto, a.port, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
