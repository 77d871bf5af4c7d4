#!/usr/bin/python3
# silent-peer.py: the two ends of a lazy-pages hand-off that never answer, to
# make a step of the harness block on purpose (test/cases/16-bounded-step.sh).
#
#   silent-peer.py lazy-pages [criu lazy-pages options]
#       a fake daemon: takes criu lazy-pages' command line (-D/--images-dir,
#       -o/--log-file, --status-fd), listens on IMGDIR/lazy-pages.socket,
#       writes its status byte, accepts and never answers nor exits.
#       --mute: never writes the status byte either.
#   silent-peer.py connect IMGDIR LOG
#       a fake `criu restore`: connects to IMGDIR/lazy-pages.socket, sends a
#       task's pid like criu's hand-off and waits for an answer forever; it
#       also leaves a `sleep` child in its process group (which the bound
#       must kill too).
# Each writes one line per stage to its log, flushed, so that the last line
# says where it is stuck.
import os
import socket
import struct
import subprocess
import sys
import time


def logger(path):
    f = open(path, "a", buffering=1)

    def log(msg):
        f.write("silent-peer %d: %s\n" % (os.getpid(), msg))

    return log


def daemon(args):
    img, logname, status_fd, mute = ".", "lazy-pages.log", None, False
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-D", "--images-dir", "-o", "--log-file", "--status-fd", "-W", "--work-dir"):
            v = args[i + 1]
            i += 1
        elif "=" in a:
            a, v = a.split("=", 1)
        else:
            v = None
        if a in ("-D", "--images-dir"):
            img = v
        elif a in ("-o", "--log-file"):
            logname = v
        elif a == "--status-fd":
            status_fd = int(v)
        elif a == "--mute":
            mute = True
        i += 1
    log = logger(os.path.join(img, logname))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    os.chdir(img)
    if os.path.exists("lazy-pages.socket"):
        os.unlink("lazy-pages.socket")
    s.bind("lazy-pages.socket")
    s.listen(8)
    if mute:
        log("listening on lazy-pages.socket; never saying so (no status byte)")
    else:
        log("listening on lazy-pages.socket")
        if status_fd is not None:
            os.write(status_fd, b"\0")
            os.close(status_fd)
    conns = []
    while True:
        c, _ = s.accept()
        conns.append(c)
        log("accepted a connection; never answering")


def connect(img, logpath):
    log = logger(logpath)
    child = subprocess.Popen(["sleep", "3600"])
    log("started sleep %d in my process group" % child.pid)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    os.chdir(img)
    s.connect("lazy-pages.socket")
    s.send(struct.pack("i", 4242))
    log("sent the hand-off of task 4242; waiting for the daemon's answer")
    while s.recv(1):
        pass
    log("the daemon closed the connection")
    time.sleep(3600)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "lazy-pages":
        daemon(sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "connect":
        connect(sys.argv[2], sys.argv[3])
    else:
        sys.stderr.write("usage: silent-peer.py lazy-pages [options] | connect IMGDIR LOG\n")
        sys.exit(2)
