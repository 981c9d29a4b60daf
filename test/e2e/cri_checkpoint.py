#!/usr/bin/python3
"""CheckpointContainer end to end over gRPC: every refusal (no id, a
missing or stopped container, a relative, existing or unwritable
location, CRIU itself refusing) leaves no archive and no work dir and the
container running; where `criu check` passes on this host, a real archive
in CRI-O's layout (checkpoint/, config.dump, spec.dump, rootfs-diff.tar)
while the container keeps running.  CreateContainer from an archive path:
a bad archive is refused naming what is wrong; a good one (fake images)
makes a container whose start runs the runtime's restore, which criu
refuses, leaving an EXITED container that removes cleanly.  The real
restore runs in the VM (test/vm/test_cri_checkpoint.sh).  Prints TAP lines.

  cri_checkpoint.py HUSKD REGISTRY WORKDIR
"""
import glob
import json
import os
import subprocess
import sys
import tarfile
import time

import grpc

HUSKD, REGISTRY, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(WORK, "gen"))
import api_pb2 as pb  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import exit_status, ok, rpc_error  # noqa: E402
import cri_client  # noqa: E402
from cri_client import Client  # noqa: E402

ROOT, STATE = os.path.join(WORK, "root"), os.path.join(WORK, "state")
SOCK = os.path.join(WORK, "husk.sock")
IMAGE = f"{REGISTRY}/test/busybox:latest"
LOGS = os.path.join(WORK, "logs")
OUT = os.path.join(WORK, "checkpoints")


def checkpoint(c, cid, location):
    return c.call("CheckpointContainer", pb.CheckpointContainerRequest(container_id=cid, location=location),
                     pb.CheckpointContainerResponse, timeout=120)


def leftovers():
    return sorted(os.listdir(OUT))


def running(c, cid):
    return c.status(cid).state == pb.CONTAINER_RUNNING


def start_counter(c, s, name):
    # The count is renamed into place: `echo >/tmp/count` truncates first,
    # and a `cat` in between read an empty file (seen once in CI).
    cfg = cri_client.container_config(
        name, IMAGE, ["i=0; while :; do i=$((i+1)); echo $i >/tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done"],
        pb.LinuxContainerSecurityContext())
    cid = c.create(s["pod"], cfg, s["pod_config"])
    c.start(cid)
    return cid


def test_refusals(c, s):
    e = rpc_error(lambda: checkpoint(c, "", os.path.join(OUT, "a.tar")))
    ok(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and "container_id: required" in e.details(),
       "no container id: INVALID_ARGUMENT", e)
    e = rpc_error(lambda: checkpoint(c, "0" * 64, os.path.join(OUT, "a.tar")))
    ok(e is not None and e.code() == grpc.StatusCode.NOT_FOUND and "0" * 64 in e.details(),
       "a missing container: NOT_FOUND naming it", e)
    cid = start_counter(c, s, "refused")
    e = rpc_error(lambda: checkpoint(c, cid, "relative.tar"))
    ok(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and "location `relative.tar`" in e.details(),
       "a relative location: INVALID_ARGUMENT naming it", e)
    taken = os.path.join(OUT, "taken.tar")
    with open(taken, "w") as f:
        f.write("mine")
    e = rpc_error(lambda: checkpoint(c, cid, taken))
    ok(e is not None and e.code() == grpc.StatusCode.ALREADY_EXISTS and open(taken).read() == "mine",
       "an existing location: ALREADY_EXISTS, the file untouched", e)
    os.unlink(taken)
    e = rpc_error(lambda: checkpoint(c, cid, "/proc/husk-checkpoint.tar"))
    ok(e is not None and "location `/proc/husk-checkpoint.tar`: create the archive beside it" in e.details(),
       "an unwritable location is refused naming it", e)
    ok(not glob.glob("/proc/husk-checkpoint.tar*"), "... nothing is left there")
    ok(running(c, cid), "... and the container still runs")
    stopped = c.create(s["pod"], cri_client.container_config("stopped", IMAGE, ["exit 0"],
                                                             pb.LinuxContainerSecurityContext()), s["pod_config"])
    c.start(stopped)
    end = time.monotonic() + 10
    while time.monotonic() < end and c.status(stopped).state != pb.CONTAINER_EXITED:
        time.sleep(0.05)
    e = rpc_error(lambda: checkpoint(c, stopped, os.path.join(OUT, "stopped.tar")))
    ok(e is not None and e.code() == grpc.StatusCode.FAILED_PRECONDITION and "is not running" in e.details(),
       "an exited container: FAILED_PRECONDITION, not running", e)
    ok(leftovers() == [], "refusals leave nothing in the checkpoint dir", leftovers())
    s["counter"] = cid


def test_criu(c, s):
    cid, location = s["counter"], os.path.join(OUT, "counter.tar")
    check = subprocess.run(["criu", "check"], capture_output=True, text=True)
    if check.returncode != 0:
        err = [line for line in check.stderr.splitlines() if "Error" in line][:1]
        print(f"# criu check fails on this host ({err}): the refusal is what is tested; the VM dumps for real")
        e = rpc_error(lambda: checkpoint(c, cid, location))
        ok(e is not None and "criu dump failed" in e.details() and "Error (" in e.details(),
           "where criu refuses, CheckpointContainer fails quoting criu's error", e)
        ok(leftovers() == [], "... leaving no archive, no work dir", leftovers())
        ok(running(c, cid), "... and the container still runs")
        r = c.call("ExecSync", pb.ExecSyncRequest(container_id=cid, cmd=["cat", "/tmp/count"], timeout=10),
                      pb.ExecSyncResponse)
        ok(r.exit_code == 0 and int(r.stdout) > 0, "... and still counts", r)
        return
    t0 = time.monotonic()
    checkpoint(c, cid, location)
    print(f"# CheckpointContainer took {time.monotonic() - t0:.2f} s")
    ok(running(c, cid), "the checkpointed container keeps running")
    with tarfile.open(location) as tar:
        names = tar.getnames()
        ok(all(n in names for n in ("config.dump", "spec.dump", "rootfs-diff.tar", "checkpoint/inventory.img")),
           "the archive holds checkpoint/, config.dump, spec.dump and rootfs-diff.tar", names)
        config = json.load(tar.extractfile("config.dump"))
        ok(config["id"] == cid and config["name"] == "refused" and config["rootfsImageName"] == IMAGE,
           "config.dump names the container and its image", config)
        spec = json.load(tar.extractfile("spec.dump"))
        ok(spec["process"]["args"][-1].startswith("i=0"), "spec.dump is the container's OCI config", spec["process"])
        with tarfile.open(fileobj=tar.extractfile("rootfs-diff.tar")) as diff:
            ok("tmp/count" in diff.getnames(), "rootfs-diff.tar holds the file the container wrote", diff.getnames())
    ok(leftovers() == ["counter.tar"], "only the archive is left", leftovers())


def tar_member(tar, name, data=None, link=None, hardlink=None):
    import io
    info = tarfile.TarInfo(name)
    if link is not None:
        info.type, info.linkname = tarfile.SYMTYPE, link
    elif hardlink is not None:
        info.type, info.linkname = tarfile.LNKTYPE, hardlink
    else:
        info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def fake_archive(path, config, diff_members=(("restored-file", b"hello", None),), deleted=None,
                 top_links=()):
    """A checkpoint archive in CRI-O's layout with CONFIG as config.dump,
    DIFF_MEMBERS (name, data, symlink target) in rootfs-diff.tar, DELETED
    as deleted.files and TOP_LINKS (name, target) as symlinks at the top
    level (in place of rootfs-diff.tar when they name it)."""
    import io
    diff = io.BytesIO()
    with tarfile.open(fileobj=diff, mode="w") as tar:
        for name, data, link in diff_members:
            tar_member(tar, name, data, link)
    members = [("config.dump", json.dumps(config).encode()), ("spec.dump", b"{}"),
               ("checkpoint/inventory.img", b"x"), ("rootfs-diff.tar", diff.getvalue())]
    if deleted is not None:
        members.append(("deleted.files", json.dumps(deleted).encode()))
    linked = {name for name, _ in top_links}
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            if name not in linked:
                tar_member(tar, name, data)
        for name, target in top_links:
            tar_member(tar, name, link=target)


def test_create_from_archive(c, s):
    before = c.list()
    bad = os.path.join(WORK, "not-a-tar.tar")
    with open(bad, "w") as f:
        f.write("hello")
    e = rpc_error(lambda: c.create(s["pod"], cri_client.container_config("restored", bad, ["true"]), s["pod_config"]))
    ok(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and f"checkpoint archive `{bad}`" in e.details(),
       "CreateContainer from a file that is no archive: INVALID_ARGUMENT naming it", e)
    partial = os.path.join(WORK, "partial.tar")
    fake_archive(partial, {"id": "abc", "name": "counter"})
    e = rpc_error(lambda: c.create(s["pod"], cri_client.container_config("restored", partial, ["true"]),
                                   s["pod_config"]))
    ok(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT
       and "config.dump: `rootfsImageName`: a non-empty string is required" in e.details(),
       "... from an archive whose config.dump lacks the image: INVALID_ARGUMENT naming the field", e)
    good = os.path.join(WORK, "good.tar")
    fake_archive(good, {"id": "abc", "name": "counter", "rootfsImageName": IMAGE})
    cid = c.create(s["pod"], cri_client.container_config("restored", good, ["true"]), s["pod_config"])
    restore = os.path.join(ROOT, "containers", cid, "restore")
    ok(os.path.exists(os.path.join(restore, "checkpoint", "inventory.img")),
       "CreateContainer from a valid archive makes a container with the archive's images to restore", cid)
    ok(c.status(cid).state == pb.CONTAINER_CREATED, "... in state CREATED", c.status(cid))
    merged = os.path.join(ROOT, "containers", cid, "merged", "restored-file")
    ok(os.path.exists(merged) and open(merged).read() == "hello", "... its rootfs holds the archive's rootfs diff")
    e = rpc_error(lambda: c.start(cid))
    st = c.status(cid)
    # A fake image: criu refuses it (here or anywhere); the plumbing shows.
    ok(e is not None and "restore" in e.details() and "criu restore failed" in e.details(),
       "StartContainer runs the runtime's restore through the monitor (criu refuses a fake image)", e)
    ok(st.state == pb.CONTAINER_EXITED and st.exit_code == 128 and st.reason == "StartError"
       and "criu restore failed" in st.message and os.path.exists(restore),
       "... the container is EXITED 128, reason StartError with criu's error, its images kept", st)
    c.remove(cid)
    ok(c.list() == before, "RemoveContainer leaves no record", c.list())
    ok(not os.path.exists(os.path.join(ROOT, "containers", cid)), "... and no container dir",
       os.listdir(os.path.join(ROOT, "containers")))


def container_dirs():
    return sorted(os.listdir(os.path.join(ROOT, "containers")))


def create_refused(c, s, name, path):
    """CreateContainer from PATH, expected to fail: its error, or None
    (the container made is removed again)."""
    try:
        cid = c.create(s["pod"], cri_client.container_config(name, path, ["true"]), s["pod_config"])
    except grpc.RpcError as e:
        print(f"# {name}: {e.code().name}: {e.details()}")
        return e
    c.remove(cid)
    return None


def test_hostile_archives(c, s):
    """Archives made to reach the host: a symlink in the rootfs diff that
    deleted.files walks through (absolute and relative), a top-level
    rootfs-diff.tar or deleted.files that is a symlink to a host file, a
    diff writing through its own symlink."""
    config = {"id": "abc", "name": "counter", "rootfsImageName": IMAGE}
    host = os.path.join(WORK, "host-dir")
    os.makedirs(host, exist_ok=True)
    victim = os.path.join(host, "victim")
    with open(victim, "w") as f:
        f.write("host data")
    climb = "../" * 40 + host.lstrip("/")
    before, dirs_before = c.list(), container_dirs()
    for kind, target in (("absolute", host), ("relative", climb)):
        path = os.path.join(WORK, f"evil-delete-{kind}.tar")
        fake_archive(path, config, [("evil", None, target), ("data/x", b"x", None), ("alias", None, "/data")],
                     deleted=["evil/victim", "alias/x"])
        cid = None
        try:
            cid = c.create(s["pod"], cri_client.container_config(f"evil-{kind}", path, ["true"]), s["pod_config"])
        except grpc.RpcError as e:
            ok(False, f"CreateContainer from an archive whose deleted.files climbs an {kind} symlink", e)
        ok(os.path.exists(victim), f"deleted.files `evil/victim` through the {kind} symlink to a host dir: "
           "the host file survives")
        if cid:
            merged = os.path.join(ROOT, "containers", cid, "merged")
            ok(not os.path.exists(os.path.join(merged, "data", "x")) and os.path.islink(os.path.join(merged, "evil")),
               "... paths resolve inside the rootfs: `alias/x` (alias -> /data) removed <rootfs>/data/x, "
               "the symlink itself stays", os.listdir(merged))
            c.remove(cid)
    # A top-level member that is a symlink to a host file.
    host_tar = os.path.join(WORK, "host.tar")
    with tarfile.open(host_tar, "w") as tar:
        tar_member(tar, "stolen", b"host secret")
    for name, target in (("rootfs-diff.tar", host_tar), ("deleted.files", victim)):
        path = os.path.join(WORK, f"evil-top-{name}.tar")
        fake_archive(path, config, top_links=[(name, target)])
        e = create_refused(c, s, "evil-top", path)
        ok(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT
           and f"member `{name}`: a symlink; only regular files and directories may be" in e.details(),
           f"a top-level {name} that is a symlink to a host file: INVALID_ARGUMENT naming the member", e)
    hard = os.path.join(WORK, "evil-top-hardlink.tar")
    fake_archive(hard, config)
    with tarfile.open(hard, "a") as tar:
        tar_member(tar, "extra", hardlink="spec.dump")
    e = create_refused(c, s, "evil-hard", hard)
    ok(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and "member `extra`: a hard link" in e.details(),
       "a top-level hard link: INVALID_ARGUMENT naming the member", e)
    # The rootfs diff writing through a symlink it made itself.
    through = os.path.join(WORK, "evil-through.tar")
    fake_archive(through, config, [("evil", None, host), ("evil/planted", b"x", None)])
    e = create_refused(c, s, "evil-through", through)
    ok(e is not None and e.code() == grpc.StatusCode.INVALID_ARGUMENT and "evil/planted" in e.details()
       and not os.path.exists(os.path.join(host, "planted")),
       "a rootfs diff writing `evil/planted` through its own symlink `evil` -> host dir: INVALID_ARGUMENT, "
       "nothing written on the host", e)
    ok(os.path.exists(victim) and os.listdir(host) == ["victim"], "the host dir holds only its own file",
       os.listdir(host))
    ok(c.list() == before and container_dirs() == dirs_before, "... and the refusals leave no container and no dir",
       container_dirs())


def main():
    os.makedirs(OUT)
    s = {"proc": cri_client.start_huskd(HUSKD, WORK, SOCK, ROOT, STATE, os.path.join(WORK, "config.json"))}
    c = Client(SOCK)
    try:
        c.pull(IMAGE)
        s["pod_config"] = cri_client.pod_config("ckpt", LOGS)
        s["pod"] = c.run_pod(s["pod_config"])
        for test in (test_refusals, test_criu, test_create_from_archive, test_hostile_archives):
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
