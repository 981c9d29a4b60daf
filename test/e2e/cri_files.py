#!/usr/bin/python3
"""Files in the wrong place, over gRPC: a --root made 0755 by hand is
tightened to 0711 at start (with a log line); a NUL inside
ContainerConfig.log_path is INVALID_ARGUMENT naming the field (it used
to cut the name short); a symlink planted in the pod's log dir, as the
log file or a directory on its way, is refused and nothing is created or
written where it points; a plain log_path in a subdirectory still works.
Prints TAP lines.

  cri_files.py HUSKD REGISTRY WORKDIR
"""
import os
import stat
import sys
import time

import grpc

HUSKD, REGISTRY, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(WORK, "gen"))
import api_pb2 as pb  # noqa: E402,F401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import exit_status, ok  # noqa: E402
import cri_client  # noqa: E402
from cri_client import Client  # noqa: E402

ROOT, STATE = os.path.join(WORK, "root"), os.path.join(WORK, "state")
SOCK = os.path.join(WORK, "husk.sock")
IMAGE = f"{REGISTRY}/test/busybox:latest"
LOGS = os.path.join(WORK, "logs")
HOST = os.path.join(WORK, "host")  # stands for the host's files


def huskd_log():
    with open(os.path.join(WORK, "huskd.log")) as f:
        return f.read()


def container_dirs():
    d = os.path.join(ROOT, "containers")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def refused(c, s, name, log_path, needle, what, at_start=False):
    """CreateContainer (and with AT_START StartContainer, where the log is
    opened) with LOG_PATH fails naming NEEDLE; the container is removed
    again and nothing of it is left.  Returns the error."""
    before, dirs = c.list(), container_dirs()
    cfg = cri_client.container_config(name, IMAGE, ["echo hi"], log_path=log_path)
    cid, e = None, None
    try:
        cid = c.create(s["pod"], cfg, s["pod_config"])
        if at_start:
            c.start(cid)
    except grpc.RpcError as err:
        e = err
    if cid:
        c.remove(cid)
    if e is not None:
        print(f"# {what}: {e.code().name}: {e.details()}")
    ok(e is not None and needle in e.details(), f"{what}: {'StartContainer' if at_start else 'CreateContainer'} "
       "refused naming it", e)
    ok(c.list() == before and container_dirs() == dirs, f"... {what}: no container and no dir left",
       (c.list(), container_dirs()))
    return e


def test_root_mode(c, s):
    mode = stat.S_IMODE(os.stat(ROOT).st_mode)
    ok(mode == 0o711, "a --root made 0755 by hand is 0711 once huskd started", oct(mode))
    ok(f"--root {ROOT} was mode 0755, readable or writable by group or others: tightened to 0711" in huskd_log(),
       "... and huskd's log says so")


def test_nul_log_path(c, s):
    e = refused(c, s, "nul", "ok.log\x00/../../../escape", "config.log_path: holds a NUL byte",
                "a NUL inside log_path")
    ok(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT, "... INVALID_ARGUMENT", e)
    ok(not os.path.exists(os.path.join(s["pod_logs"], "ok.log")), "... and no log file `ok.log` was made")


def test_log_symlinks(c, s):
    logs = s["pod_logs"]
    os.makedirs(HOST, exist_ok=True)
    target = os.path.join(HOST, "target.log")
    os.symlink(target, os.path.join(logs, "evil.log"))
    os.symlink(HOST, os.path.join(logs, "evildir"))
    os.symlink("../../host", os.path.join(logs, "climb"))
    try:
        refused(c, s, "evil-file", "evil.log", "a symlink under the log dir",
                "log_path `evil.log`, a symlink in the log dir to a host file", at_start=True)
        refused(c, s, "evil-dir", "evildir/0.log", "`evildir`: a symlink or not a directory: refused",
                "log_path `evildir/0.log` through a symlink to a host dir", at_start=True)
        refused(c, s, "evil-deep", "evildir/sub/0.log", "`evildir`: a symlink or not a directory: refused",
                "log_path `evildir/sub/0.log` (huskd would make the dir)", at_start=True)
        refused(c, s, "evil-climb", "climb/0.log", "`climb`: a symlink or not a directory: refused",
                "log_path `climb/0.log` through a relative symlink out", at_start=True)
        ok(sorted(os.listdir(HOST)) == [], "nothing was created or written in the host dir", os.listdir(HOST))
    finally:
        for name in ("evil.log", "evildir", "climb"):
            os.unlink(os.path.join(logs, name))
    cfg = cri_client.container_config("plain", IMAGE, ["echo hi-from-plain"], log_path="plain/0.log")
    cid = c.create(s["pod"], cfg, s["pod_config"])
    c.start(cid)
    path = os.path.join(logs, "plain", "0.log")
    for _ in range(100):
        if os.path.exists(path) and "hi-from-plain" in open(path).read():
            break
        time.sleep(0.1)
    ok(os.path.exists(path) and "stdout F hi-from-plain" in open(path).read(),
       "a plain log_path in a subdirectory (plain/0.log) still gets the container's output")
    c.stop(cid, timeout=2)
    c.remove(cid)


def main():
    os.makedirs(ROOT, mode=0o755)
    os.chmod(ROOT, 0o755)
    s = {"proc": cri_client.start_huskd(HUSKD, WORK, SOCK, ROOT, STATE, os.path.join(WORK, "config.json"))}
    c = Client(SOCK)
    try:
        c.pull(IMAGE)
        s["pod_config"] = cri_client.pod_config("files", LOGS)
        s["pod_logs"] = s["pod_config"].log_directory
        s["pod"] = c.run_pod(s["pod_config"])
        os.makedirs(s["pod_logs"], exist_ok=True)
        for test in (test_root_mode, test_nul_log_path, test_log_symlinks):
            try:
                test(c, s)
            except Exception as e:  # a crash of one test is one failure
                ok(False, f"{test.__name__}: raised", repr(e))
        c.stop_pod(s["pod"])
        c.remove_pod(s["pod"])
    except Exception as e:
        ok(False, "setup: pull and run a pod", repr(e))
    finally:
        cri_client.stop_huskd(s["proc"])
    exit_status()


main()
