#!/usr/bin/python3
"""A client of husk-monitor's attach socket (protocol in cri/container/attach.h), for
the tests: connects, does STEPS in order, then reads until the exit message
or the end of the connection, and prints one JSON object: {"stdout",
"stderr" (the bytes, as latin-1 text), "stdout_bytes", "stderr_bytes",
"exit" (its text, or null), "messages", "max_message", "bad" (messages of
an unknown type)}.

  attach_client.py SOCKET [STEP...]

Steps: ready:FILE (create FILE: connected), send:TEXT (stdin; \\n is a
newline), wait:TEXT (until stdout holds TEXT), close (close stdin),
resize:ROWS:COLS, bulk:BYTES (stdin in 32 KiB
messages), sleep:SECONDS, hold:FILE (read nothing until FILE
exists), raw:HEX (one message of these bytes).  Gives up after 30 s.
"""
import json
import os
import socket
import struct
import sys
import time

DEADLINE = time.monotonic() + 30
out = {"stdout": b"", "stderr": b"", "exit": None, "messages": 0, "max_message": 0, "bad": 0}


def receive(sock, block=True):
    """One server message into OUT; False at the end of the connection."""
    sock.settimeout(max(0.01, DEADLINE - time.monotonic()) if block else 0.05)
    try:
        msg = sock.recv(65536)
    except (socket.timeout, BlockingIOError):
        if block:
            raise
        return True
    except ConnectionResetError:
        return False
    if not msg:
        return False
    out["messages"] += 1
    out["max_message"] = max(out["max_message"], len(msg))
    if msg[0] == 1:
        out["stdout"] += msg[1:]
    elif msg[0] == 2:
        out["stderr"] += msg[1:]
    elif msg[0] == 3:
        out["exit"] = msg[1:].decode()
    else:
        out["bad"] += 1
    return True


def step(sock, action):
    kind, _, arg = action.partition(":")
    if kind == "ready":
        open(arg, "w").close()
    elif kind == "send":
        sock.send(b"\0" + arg.replace("\\n", "\n").encode())
    elif kind == "wait":
        want = arg.replace("\\n", "\n").encode()
        while want not in out["stdout"]:
            if not receive(sock):
                raise SystemExit("connection ended before %r came" % want)
    elif kind == "close":
        sock.send(b"\1")
    elif kind == "resize":
        rows, cols = arg.split(":")
        sock.send(b"\2" + struct.pack("<HH", int(rows), int(cols)))
    elif kind == "sleep":
        time.sleep(float(arg))
    elif kind == "hold":
        while not os.path.exists(arg) and time.monotonic() < DEADLINE:
            time.sleep(0.05)
    elif kind == "bulk":
        chunk = b"\0" + b"s" * 32768
        for _ in range(int(arg) // 32768):
            sock.send(chunk)
    elif kind == "raw":
        sock.send(bytes.fromhex(arg))
    else:
        raise SystemExit("unknown step %r" % action)


def main():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    path = sys.argv[1]
    if len(path.encode()) > 107:
        # Longer than sun_path: through the folder, as husk does.
        dir_fd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
        path = "/proc/self/fd/%d/%s" % (dir_fd, os.path.basename(path))
    sock.connect(path)
    for action in sys.argv[2:]:
        step(sock, action)
    try:
        while out["exit"] is None and receive(sock):
            pass
    except socket.timeout:
        out["timeout"] = True
    for key in ("stdout", "stderr"):
        out[key + "_bytes"] = len(out[key])
        out[key] = out[key].decode("latin-1")
    print(json.dumps(out))


main()
