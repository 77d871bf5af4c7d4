#!/usr/bin/python3
"""Fill a key-value server, or restore it and put a GET load on it at once.

load.py fill --proto P --port N --keys K --size S
load.py run  --proto P --port N --keys K --size S [--seed X] [--seconds 1,10]
             [--bound B] [--hot H] [--hot-share F] [--rate R] [--on-time-us U]
             [--settle-pid PID] [--settle-seconds W] [--trace FILE]
             [-- RESTORE COMMAND...]

P is resp (redis-server, pydict.py) or memcache (memcached).  Key i is
"key:<i>", its value "value:<i>" zero-padded to S bytes, i < K.

fill SETs every key through one pipelined connection and checks that the
server holds K keys afterwards.

run prepares the whole request sequence first, then (t0) runs the restore
command, waits for it (B seconds at most, default 60; its process group is
killed past that), and the moment it returns starts an open-loop schedule:
request k is due at k/R seconds (R default 10000 a second), GETs on one
connection to 127.0.0.1:N (connecting, retrying every 0.5 ms, is part of the
first requests' latency): with probability F (default 0.9) for one of the H
hot keys (default 10000, a fixed random subset), else for any key.  Every
request due is sent at once, pipelined behind those not answered yet, so a
server that stalls finds the whole backlog waiting, and each latency counts
from the request's due time, not from when it could be sent (no coordinated
omission: a 650 ms stall is 6500 slow requests at 10000/s, not one).  Every
reply must be the value fill wrote; a wrong reply ends the run with status
1.  Without a command, t0 is the start (the program as it runs, never
dumped).  Prints one JSON line: restore_s (t0 to the command's exit),
first_reply_s (t0 to the first correct reply), and for each window W of
--seconds (default 1,10) of the requests due in the first W seconds:
requests, p50_us, p99_us, max_us and on_time (the share answered within U
us of its due time, default 1000).  The same for the "settled" window: the
W seconds (default 3) from the exit of PID (the lazy-pages daemon, so all
is resident and its last huge-page collapses are done; settle_at_s says
when), or from 1 s without PID; never before 1 s.  --trace writes each
request's due time (CLOCK_MONOTONIC, s) and latency (us), a line each.
"""
import argparse
import ctypes
import gc
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
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


def mc_get(key):
    return b"get %s\r\n" % key


PROTO = {"resp": resp_get, "memcache": mc_get}


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
    # A blocking wait, bounded by a timer: Popen.wait(timeout=) polls with
    # sleeps doubling up to 50 ms, which rounded the restore's return (and the
    # load's start) up to the next poll.
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)
    late = threading.Event()

    def kill():
        late.set()
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended meanwhile
            pass

    timer = threading.Timer(bound, kill)
    timer.start()
    rc = p.wait()
    timer.cancel()
    if late.is_set():
        raise RuntimeError("%s: still running after %d s, killed" % (cmd[0], bound))
    if rc:
        raise RuntimeError("%s exited with %d" % (cmd[0], rc))


def pick(lat, q):
    return round(lat[min(len(lat) - 1, int(q * len(lat)))], 1)


def timer_slack():
    """Wake-ups on time: the default 50 us timer slack would be latency on every request."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(29, 1, 0, 0, 0):  # PR_SET_TIMERSLACK, 1 ns
            print("load.py: PR_SET_TIMERSLACK: %s" % os.strerror(ctypes.get_errno()), file=sys.stderr)
    except OSError as e:
        print("load.py: no PR_SET_TIMERSLACK: %s" % e, file=sys.stderr)


class Replies:
    """Replies parsed from a non-blocking socket's bytes as they come."""

    def __init__(self, proto):
        self.buf, self.pos, self.mc = bytearray(), 0, proto == "memcache"

    def feed(self, data):
        if self.pos > (1 << 20):
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += data

    def next(self):
        """(True, value or None) for a whole reply, (False, None) for more bytes first."""
        b, p = self.buf, self.pos
        e = b.find(b"\r\n", p)
        if e < 0:
            return False, None
        if self.mc:
            if b[p:e] == b"END":
                self.pos = e + 2
                return True, None
            parts = bytes(b[p:e]).split()
            if len(parts) != 4 or parts[0] != b"VALUE":
                raise ValueError("reply %r" % bytes(b[p:p + 80]))
            n = int(parts[3])
            if len(b) < e + 2 + n + 7:
                return False, None
            if b[e + 2 + n:e + 2 + n + 7] != b"\r\nEND\r\n":
                raise ValueError("no END after the value: %r" % bytes(b[e + 2 + n:e + 2 + n + 40]))
            self.pos = e + 2 + n + 7
            return True, bytes(b[e + 2:e + 2 + n])
        if b[p:p + 1] != b"$":
            raise ValueError("reply %r" % bytes(b[p:p + 80]))
        n = int(b[p + 1:e])
        if n < 0:
            self.pos = e + 2
            return True, None
        if len(b) < e + 2 + n + 2:
            return False, None
        self.pos = e + 2 + n + 2
        return True, bytes(b[e + 2:e + 2 + n])


def window(out, tag, lat, lo, hi, on_time_us):
    ws = sorted(us for at, us in lat if lo <= at < hi)
    out["requests_" + tag] = len(ws)
    if ws:
        out.update({"p50_us_" + tag: pick(ws, 0.5), "p99_us_" + tag: pick(ws, 0.99), "max_us_" + tag: round(ws[-1], 1),
                    "on_time_" + tag: round(sum(1 for us in ws if us <= on_time_us) / len(ws), 4)})


def run(a, cmd):
    send = PROTO[a.proto]
    windows = sorted(float(w) for w in a.seconds.split(","))
    rnd = random.Random(a.seed)
    hot = [rnd.randrange(a.keys) for _ in range(min(a.hot, a.keys))]
    # everything the loop needs is made before t0: the clock then runs for the restore and the server only
    n_pre = 200000
    seq = [rnd.choice(hot) if rnd.random() < a.hot_share else rnd.randrange(a.keys) for _ in range(n_pre)]
    reqs = [send(b"key:%d" % i) for i in seq]
    hot_vals = {i: value(i, a.size) for i in hot}
    interval = 1.0 / a.rate
    # the daemon's exit starts the settled window; its pidfd is taken while it surely runs
    daemon = os.pidfd_open(a.settle_pid) if a.settle_pid else None
    gc.disable()  # no collector pause in the measured loop
    timer_slack()
    t0 = time.monotonic()
    restore_s = None
    if cmd:
        restore(cmd, a.bound)
        restore_s = time.monotonic() - t0
    start = time.monotonic()  # the schedule starts: request k is due at start + k / rate
    if not cmd:
        t0 = start
    s = connect(a.port, start + 30)
    s.setblocking(False)
    rep = Replies(a.proto)
    lat, first = [], None
    sent = answered = 0  # requests sent; replies read (in order)
    out = bytearray()
    settle = None if daemon is not None else 1.0  # the settled window's start, s after start
    stop = None  # no request is due at or after it
    bound = start + max(windows) + a.settle_seconds + a.bound + 60
    while True:
        now = time.monotonic()
        if now > bound:
            raise RuntimeError("the load did not end in time (%d of %d replies)" % (answered, sent))
        if stop is None and settle is not None:
            stop = max(windows[-1], settle + a.settle_seconds)
        # every request due by now goes out, pipelined behind those not answered yet: the schedule is kept
        due = int((now - start) / interval) + 1
        if stop is not None:
            due = min(due, int(stop / interval))
        while sent < due:
            out += reqs[sent % n_pre]
            sent += 1
        if out:
            try:
                n = s.send(out)
                del out[:n]
            except BlockingIOError:
                pass
        if stop is not None and answered == sent and sent >= int(stop / interval):
            break
        wait = start + sent * interval - now
        watch = [s] if settle is not None else [s, daemon]
        r, _, _ = select.select(watch, [s] if out else [], [], max(0.0, min(wait, 0.01)))
        if daemon in r:  # the daemon is gone: all resident, its last collapses done
            settle = max(1.0, time.monotonic() - start)
        if s not in r:
            continue
        data = s.recv(1 << 20)
        if not data:
            raise RuntimeError("the server closed the connection (%d of %d replies)" % (answered, sent))
        rep.feed(data)
        now = time.monotonic()
        while True:
            whole, v = rep.next()
            if not whole:
                break
            if answered >= sent:
                raise ValueError("a reply to no request")
            i = seq[answered % n_pre]
            if v != (hot_vals.get(i) or value(i, a.size)):
                print("wrong reply for key:%d: %r" % (i, None if v is None else v[:40]), file=sys.stderr)
                return 1
            due_at = answered * interval
            answered += 1
            if first is None:
                first = now
            lat.append((due_at, (now - start - due_at) * 1e6))
    out = {"restore_s": None if restore_s is None else round(restore_s, 6), "first_reply_s": round(first - t0, 6),
           "rate": a.rate}
    for w in windows:
        window(out, "%gs" % w, lat, 0, w, a.on_time_us)
    out["settle_at_s"] = round(settle, 3)
    window(out, "settled", lat, settle, settle + a.settle_seconds, a.on_time_us)
    if a.trace:
        with open(a.trace, "w") as f:
            f.writelines("%.6f %.1f\n" % (start + at, us) for at, us in lat)
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
    p.add_argument("--rate", type=float, default=10000)
    p.add_argument("--on-time-us", type=float, default=1000)
    p.add_argument("--settle-pid", type=int)
    p.add_argument("--settle-seconds", type=float, default=3)
    p.add_argument("--trace")
    a = p.parse_args(argv)
    try:
        return fill(a) if a.what == "fill" else run(a, cmd)
    except (OSError, ValueError, RuntimeError) as e:
        print("load.py %s (%s, port %d): %s" % (a.what, a.proto, a.port, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
