#!/usr/bin/python3
"""Receives a container's pty master over an OCI --console-socket.

usage: console_receiver.py SOCKET OUTFILE [TIMEOUT_SECONDS]

Listens on the unix socket SOCKET, accepts one connection from the runtime,
takes the pty master fd passed with SCM_RIGHTS, and copies everything read
from it to OUTFILE until the container side closes (EIO) or TIMEOUT passes.
Writes "fd-received" to stderr once it holds the fd.  Exits 0 when a fd was
received, 1 otherwise.
"""

import array
import os
import select
import socket
import sys
import time


def receive_fd(conn):
    fds = array.array("i")
    msg, ancdata, _flags, _addr = conn.recvmsg(4096, socket.CMSG_LEN(16 * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if not fds:
        raise RuntimeError("no file descriptor in the message (payload %r)" % msg)
    for extra in fds[1:]:
        os.close(extra)
    return fds[0]


def copy_until_closed(master, out, deadline):
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every slave fd is closed
            return
        if not chunk:
            return
        out.write(chunk)
        out.flush()


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    sock_path, out_path = sys.argv[1], sys.argv[2]
    timeout = float(sys.argv[3]) if len(sys.argv) == 4 else 20.0
    deadline = time.monotonic() + timeout

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(1)
    listener.settimeout(timeout)
    try:
        conn, _ = listener.accept()
    except socket.timeout:
        print("console_receiver: no connection", file=sys.stderr)
        return 1
    with conn:
        conn.settimeout(max(0.1, deadline - time.monotonic()))
        master = receive_fd(conn)
    print("fd-received", file=sys.stderr, flush=True)
    with open(out_path, "ab") as out:
        copy_until_closed(master, out, deadline)
    os.close(master)
    return 0


if __name__ == "__main__":
    sys.exit(main())
