#!/usr/bin/python3
"""first-reply.py PORT KEY VALUE_LEN READY_FILE BOUND_S

Run inside the destination container's network namespace before the
migration starts.  Tries to connect to 127.0.0.1:PORT every millisecond
(nothing listens there until the restored redis-server's socket is back;
each try bounded by 10 ms, as criu drops packets while it restores),
then sends `GET KEY` and waits for the whole bulk reply of VALUE_LEN
bytes.  Prints the time (seconds since the epoch) the reply was complete.
Writes READY_FILE once it polls.  Exit 1 after BOUND_S seconds without a
reply, or on a reply that is not VALUE_LEN bytes."""
import socket
import sys
import time


def main():
    port, key, vlen, ready, bound = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
    want = f"${vlen}\r\n".encode()
    end = time.monotonic() + bound
    open(ready, "w").close()
    dropped = 0
    while time.monotonic() < end:
        # criu drops packets while it restores the network (its network
        # lock): a dropped SYN would be retried by TCP after a second, so
        # each try has its own short bound and a new socket
        s = socket.socket()
        s.settimeout(0.01)
        try:
            s.connect(("127.0.0.1", port))
        except socket.timeout:
            s.close()
            dropped += 1
            continue
        except OSError:
            s.close()
            time.sleep(0.001)
            continue
        print(f"connected at {time.time():.6f} after {dropped} unanswered SYNs", file=sys.stderr)
        s.settimeout(max(0.1, end - time.monotonic()))
        s.sendall(f"GET {key}\r\n".encode())
        buf = b""
        try:
            while len(buf) < len(want) + vlen + 2:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except OSError:
            pass
        t = time.time()
        s.close()
        if not buf.startswith(want) or len(buf) != len(want) + vlen + 2:
            print(f"bad reply to GET {key}: {buf[:60]!r} ({len(buf)} bytes)", file=sys.stderr)
            return 1
        print(f"{t:.6f}")
        return 0
    print(f"no reply from 127.0.0.1:{port} in {bound} s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
