#!/usr/bin/python3
"""husk's own command-line CRI client, for the shell tests (test code, not a
product feature): the verbs the tests need, with crictl's names, flags and
output where a test reads them, over husk's Python gRPC client
(cri_client.py) and SPDY client (spdy_client.py).

  cri_cli.py [-r unix://SOCK] [-i unix://SOCK] [-t 30s] [--config crictl.yaml] VERB ARGS...

Verbs: version info runp stopp rmp pods inspectp create start stop rm ps
inspect exec attach port-forward logs stats statsp events checkpoint pull
images inspecti rmi.  inspect*/info print JSON ({"status": ..., "info": {...}}
as crictl does), or one value with -o go-template --template '{{.a.b}}'
(only field paths).  The endpoint comes from -r, else CONTAINER_RUNTIME_ENDPOINT,
else runtime-endpoint in --config or CRI_CONFIG_FILE (crictl.yaml's keys).

The Python CRI messages (api_pb2) are taken from HUSK_CRI_GEN when set,
else generated once from cri/proto/api.proto with protoc into a cache
directory keyed by the proto's hash."""
import argparse
import fcntl
import hashlib
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time
import tty as ttymod

HERE = os.path.dirname(os.path.abspath(__file__))


def load_messages():
    """Puts a directory holding api_pb2 on sys.path."""
    gen = os.environ.get("HUSK_CRI_GEN")
    if not gen:
        proto = os.path.join(HERE, "..", "..", "cri", "proto", "api.proto")
        with open(proto, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:16]
        gen = os.path.join(tempfile.gettempdir(), f"husk-cri-py-{digest}")
        if not os.path.exists(os.path.join(gen, "api_pb2.py")):
            tmp = tempfile.mkdtemp(prefix="husk-cri-py-")
            r = subprocess.run(["protoc", f"--python_out={tmp}", "-I", os.path.dirname(proto), proto],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"cri_cli: protoc {proto}: {r.stderr.strip()}")
            try:
                os.rename(tmp, gen)
            except OSError:  # another run made it first
                subprocess.run(["rm", "-rf", tmp])
    sys.path[:0] = [gen, HERE]


load_messages()
import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402

import api_pb2 as pb  # noqa: E402
import cri_client  # noqa: E402
import spdy_client  # noqa: E402


def fail(msg, code=1):
    print(f"cri_cli: {msg}", file=sys.stderr)
    sys.exit(code)


def read_config(path):
    """crictl.yaml's flat `key: value` lines."""
    conf = {}
    with open(path) as f:
        for line in f:
            if ":" in line and not line.lstrip().startswith("#"):
                k, v = line.split(":", 1)
                conf[k.strip()] = v.strip().strip('"')
    return conf


def seconds(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", str(text))
    if not m:
        fail(f"timeout `{text}`: want N, Ns, Nms or Nm", 2)
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, None: 1}[m.group(2)]


class Cli:
    def __init__(self, endpoint, timeout):
        if not endpoint.startswith("unix://"):
            fail(f"endpoint `{endpoint}`: only unix:// sockets", 2)
        self.client = cri_client.Client(endpoint[len("unix://"):])
        self.timeout = timeout

    def rt(self, method, request, reply, timeout=None):
        return self.call(method, request, reply, "RuntimeService", timeout)

    def img(self, method, request, reply, timeout=None):
        return self.call(method, request, reply, "ImageService", timeout)

    def call(self, method, request, reply, service, timeout=None):
        try:
            return self.client.call(method, request, reply, timeout=timeout or self.timeout, service=service)
        except grpc.RpcError as e:
            fail(f"{method}: rpc error: code = {e.code().name} desc = {e.details()}")


def to_dict(msg):
    # crictl (Go's jsonpb with EmitDefaults) shows zero values too: SANDBOX_READY is 0.
    return json_format.MessageToDict(msg, including_default_value_fields=True)


def verbose_doc(status_msg, info):
    """crictl's inspect layout: {"status": ...} and beside it each info key,
    its value parsed as JSON where it is JSON (ContainerStatus's verbose
    info is one key, "info")."""
    doc = {"status": to_dict(status_msg)}
    for k, v in info.items():
        try:
            doc[k] = json.loads(v)
        except ValueError:
            doc[k] = v
    return doc


def template_value(doc, template):
    """go-template's field paths only: '{{.a.b}}' with text around them."""
    def one(m):
        value = doc
        for key in m.group(1).split(".")[1:]:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return "<no value>"
        return json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return re.sub(r"\{\{\s*(\.[A-Za-z0-9_.]*)\s*\}\}", one, template)


def print_doc(doc, args):
    if getattr(args, "output", "json") == "go-template":
        print(template_value(doc, args.template or ""))
    else:
        print(json.dumps(doc, indent=2))


def print_list(args, key, items, header, row):
    """-o json ({KEY: [...]}), -q (whole ids, as crictl prints them), or a table."""
    if args.output == "json":
        print(json.dumps({key: [to_dict(i) for i in items]}, indent=2))
    elif args.quiet:
        print("\n".join(i.id for i in items))
    else:
        print(header)
        for i in items:
            print(row(i))


def parse_json_file(path, msg_type):
    try:
        with open(path) as f:
            return json_format.Parse(f.read(), msg_type(), ignore_unknown_fields=False)
    except (OSError, json_format.ParseError) as e:
        fail(f"{path}: {e}")


# ----------------------------------------------------------- runtime info

def cmd_version(cli, args):
    r = cli.rt("Version", pb.VersionRequest(version="v1"), pb.VersionResponse)
    print(f"Version:  {r.version}\nRuntimeName:  {r.runtime_name}\nRuntimeVersion:  {r.runtime_version}\n"
          f"RuntimeApiVersion:  {r.runtime_api_version}")


def cmd_info(cli, args):
    r = cli.rt("Status", pb.StatusRequest(verbose=True), pb.StatusResponse)
    print_doc(verbose_doc(r.status, r.info), args)


# ------------------------------------------------------------------- pods

def cmd_runp(cli, args):
    config = parse_json_file(args.config, pb.PodSandboxConfig)
    r = cli.rt("RunPodSandbox", pb.RunPodSandboxRequest(config=config, runtime_handler=args.runtime or ""),
               pb.RunPodSandboxResponse)
    print(r.pod_sandbox_id)


def list_pods(cli, state=None, name=None):
    f = pb.PodSandboxFilter()
    if state:
        f.state.state = pb.PodSandboxState.Value(state)
    items = cli.rt("ListPodSandbox", pb.ListPodSandboxRequest(filter=f), pb.ListPodSandboxResponse).items
    return [p for p in items if not name or re.search(name, p.metadata.name)]


def resolve(ids, candidates, what):
    """Full ids of ID prefixes (crictl accepts unique prefixes)."""
    out = []
    for i in ids:
        hits = [c for c in candidates if c.startswith(i)]
        out.append(hits[0] if len(hits) == 1 else i)
    return out


def pod_ids(cli, ids, all_=False):
    pods = [p.id for p in list_pods(cli)]
    return pods if all_ else resolve(ids, pods, "pod")


def cmd_stopp(cli, args):
    for pod in pod_ids(cli, args.ids, args.all):
        cli.rt("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=pod), pb.StopPodSandboxResponse)
        print(f"Stopped sandbox {pod}")


def cmd_rmp(cli, args):
    for pod in pod_ids(cli, args.ids, args.all):
        if args.force:
            cli.rt("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=pod), pb.StopPodSandboxResponse)
        cli.rt("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=pod), pb.RemovePodSandboxResponse)
        print(f"Removed sandbox {pod}")


def cmd_pods(cli, args):
    pods = list_pods(cli, args.state and "SANDBOX_" + args.state.upper(), args.name)
    print_list(args, "items", pods, "POD ID\tSTATE\tNAME\tNAMESPACE\tRUNTIME",
               lambda p: f"{p.id[:13]}\t{pb.PodSandboxState.Name(p.state)}\t{p.metadata.name}\t"
                         f"{p.metadata.namespace}\t{p.runtime_handler}")


def cmd_inspectp(cli, args):
    for pod in pod_ids(cli, args.ids):
        r = cli.rt("PodSandboxStatus", pb.PodSandboxStatusRequest(pod_sandbox_id=pod, verbose=True),
                   pb.PodSandboxStatusResponse)
        print_doc(verbose_doc(r.status, r.info), args)


# ------------------------------------------------------------- containers

def list_containers(cli, all_=False, state=None, pod=None, name=None):
    f = pb.ContainerFilter(pod_sandbox_id=pod or "")
    if state:
        f.state.state = pb.ContainerState.Value(state)
    items = cli.rt("ListContainers", pb.ListContainersRequest(filter=f), pb.ListContainersResponse).containers
    if not all_ and not state:
        items = [c for c in items if c.state == pb.CONTAINER_RUNNING]
    return [c for c in items if not name or re.search(name, c.metadata.name)]


def container_ids(cli, ids):
    return resolve(ids, [c.id for c in list_containers(cli, all_=True)], "container")


def ensure_image(cli, image):
    """crictl create pulls an image it does not have."""
    r = cli.img("ImageStatus", pb.ImageStatusRequest(image=pb.ImageSpec(image=image)), pb.ImageStatusResponse)
    if not r.image.id:
        cli.img("PullImage", pb.PullImageRequest(image=pb.ImageSpec(image=image)), pb.PullImageResponse,
                timeout=max(cli.timeout, 120))


def cmd_create(cli, args):
    config = parse_json_file(args.config, pb.ContainerConfig)
    sandbox = parse_json_file(args.pod_config, pb.PodSandboxConfig)
    if not args.no_pull and config.image.image:
        ensure_image(cli, config.image.image)
    r = cli.rt("CreateContainer", pb.CreateContainerRequest(pod_sandbox_id=args.pod, config=config,
                                                            sandbox_config=sandbox), pb.CreateContainerResponse)
    print(r.container_id)


def cmd_start(cli, args):
    for cid in container_ids(cli, args.ids):
        cli.rt("StartContainer", pb.StartContainerRequest(container_id=cid), pb.StartContainerResponse)
        print(cid)


def cmd_stop(cli, args):
    for cid in container_ids(cli, args.ids):
        cli.rt("StopContainer", pb.StopContainerRequest(container_id=cid, timeout=args.stop_timeout),
               pb.StopContainerResponse, timeout=cli.timeout + args.stop_timeout)
        print(cid)


def cmd_rm(cli, args):
    ids = [c.id for c in list_containers(cli, all_=True)] if args.all else container_ids(cli, args.ids)
    for cid in ids:
        if args.force:
            cli.rt("StopContainer", pb.StopContainerRequest(container_id=cid, timeout=0), pb.StopContainerResponse)
        cli.rt("RemoveContainer", pb.RemoveContainerRequest(container_id=cid), pb.RemoveContainerResponse)
        print(cid)


def cmd_ps(cli, args):
    state = args.state and "CONTAINER_" + args.state.upper()
    items = list_containers(cli, args.all, state, args.pod, args.name)
    print_list(args, "containers", items, "CONTAINER\tIMAGE\tSTATE\tNAME\tATTEMPT\tPOD ID",
               lambda c: f"{c.id[:13]}\t{c.image.image}\t{pb.ContainerState.Name(c.state)}\t{c.metadata.name}\t"
                         f"{c.metadata.attempt}\t{c.pod_sandbox_id[:13]}")


def cmd_inspect(cli, args):
    for cid in container_ids(cli, args.ids):
        r = cli.rt("ContainerStatus", pb.ContainerStatusRequest(container_id=cid, verbose=True),
                   pb.ContainerStatusResponse)
        print_doc(verbose_doc(r.status, r.info), args)


def cmd_stats(cli, args):
    r = cli.rt("ListContainerStats", pb.ListContainerStatsRequest(filter=pb.ContainerStatsFilter(
        id=args.id or "", pod_sandbox_id=args.pod or "")), pb.ListContainerStatsResponse)
    if args.output == "json":
        print(json.dumps({"stats": [to_dict(s) for s in r.stats]}, indent=2))
    else:
        print("CONTAINER\tCPU NANOS\tMEM")
        for s in r.stats:
            print(f"{s.attributes.id[:13]}\t{s.cpu.usage_core_nano_seconds.value}\t"
                  f"{s.memory.working_set_bytes.value}")


def cmd_statsp(cli, args):
    r = cli.rt("ListPodSandboxStats", pb.ListPodSandboxStatsRequest(filter=pb.PodSandboxStatsFilter(
        id=args.id or "")), pb.ListPodSandboxStatsResponse)
    print(json.dumps({"stats": [to_dict(s) for s in r.stats]}, indent=2))


def cmd_checkpoint(cli, args):
    cid = container_ids(cli, [args.id])[0]
    cli.rt("CheckpointContainer", pb.CheckpointContainerRequest(container_id=cid, location=args.export,
                                                                timeout=int(cli.timeout)),
           pb.CheckpointContainerResponse, timeout=cli.timeout + 10)
    print(cid)


def cmd_events(cli, args):
    """Each event as one JSON line until interrupted (crictl events)."""
    stream = cli.client.stream("GetContainerEvents", pb.GetEventsRequest(), pb.ContainerEventResponse,
                               timeout=None)
    try:
        for event in stream:
            print(json.dumps(to_dict(event)), flush=True)
    except KeyboardInterrupt:
        stream.cancel()
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.CANCELLED:
            fail(f"GetContainerEvents: rpc error: code = {e.code().name} desc = {e.details()}")


def cmd_logs(cli, args):
    """The container's CRI log file, as crictl reads it: each stream to its
    own fd, partial lines joined; -f follows until the container exits."""
    cid = container_ids(cli, [args.id])[0]
    status = cli.rt("ContainerStatus", pb.ContainerStatusRequest(container_id=cid),
                    pb.ContainerStatusResponse).status
    if not status.log_path:
        fail(f"container {cid} has no log path")
    outs = {"stdout": sys.stdout.buffer, "stderr": sys.stderr.buffer}
    with open(status.log_path, "rb") as f:
        pending = b""
        while True:
            chunk = f.readline()
            if chunk.endswith(b"\n"):
                line = pending + chunk
                pending = b""
                parts = line.rstrip(b"\n").split(b" ", 3)
                if len(parts) == 4 and parts[1].decode() in outs:
                    out = outs[parts[1].decode()]
                    out.write(parts[3] + (b"\n" if parts[2] == b"F" else b""))
                    out.flush()
                continue
            pending += chunk
            if not args.follow:
                break
            st = cli.rt("ContainerStatus", pb.ContainerStatusRequest(container_id=cid),
                        pb.ContainerStatusResponse).status
            if st.state != pb.CONTAINER_RUNNING and not chunk:
                # Whatever was written before the exit is in the file now.
                rest = f.read()
                if not rest:
                    break
                f.seek(-len(rest), os.SEEK_CUR)
                continue
            time.sleep(0.1)


# ----------------------------------------------------------------- images

def cmd_pull(cli, args):
    auth = None
    if args.creds:
        user, _, password = args.creds.partition(":")
        auth = pb.AuthConfig(username=user, password=password)
    r = cli.img("PullImage", pb.PullImageRequest(image=pb.ImageSpec(image=args.image), auth=auth),
                pb.PullImageResponse, timeout=max(cli.timeout, 120))
    print(f"Image is up to date for {r.image_ref}")


def cmd_images(cli, args):
    r = cli.img("ListImages", pb.ListImagesRequest(), pb.ListImagesResponse)
    if args.quiet:
        print("\n".join(i.id for i in r.images))
        return
    print("IMAGE\tTAG\tIMAGE ID\tSIZE")
    for i in r.images:
        for tag in i.repo_tags or ["<none>:<none>"]:
            repo, _, t = tag.rpartition(":")
            print(f"{repo}\t{t}\t{i.id[7:20] if i.id.startswith('sha256:') else i.id[:13]}\t{i.size}")


def cmd_inspecti(cli, args):
    for image in args.images:
        r = cli.img("ImageStatus", pb.ImageStatusRequest(image=pb.ImageSpec(image=image), verbose=True),
                    pb.ImageStatusResponse)
        if not r.image.id:
            fail(f"no such image {image} present")
        print_doc(verbose_doc(r.image, r.info), args)


def cmd_rmi(cli, args):
    for image in args.images:
        cli.img("RemoveImage", pb.RemoveImageRequest(image=pb.ImageSpec(image=image)), pb.RemoveImageResponse)
        print(f"Deleted: {image}")


# -------------------------------------------------------------- streaming

class Terminal:
    """The local terminal in raw mode while a tty session runs, and its
    size (rows, cols) from TIOCGWINSZ."""

    def __init__(self, fd):
        self.fd, self.saved = fd, None

    def size(self):
        rows, cols = struct.unpack("HHHH", fcntl.ioctl(self.fd, termios.TIOCGWINSZ, b"\0" * 8))[:2]
        return rows, cols

    def __enter__(self):
        self.saved = termios.tcgetattr(self.fd)
        ttymod.setraw(self.fd)
        return self

    def __exit__(self, *exc):
        termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)


def frame_ready(conn):
    buf = conn.buf
    return len(buf) >= 8 and len(buf) >= 8 + (struct.unpack(">I", buf[4:8])[0] & 0xffffff)


def stream_session(url, stdin, tty):
    """An exec or attach session on URL (SPDY/3.1, v4 channels) wired to
    this process's stdio: stdin forwarded as it comes, output written as it
    arrives, the local terminal's size sent first and on SIGWINCH.  Returns
    the remote exit code (0 on success; None when the status has none)."""
    c = spdy_client.Conn(url, ("v4.channel.k8s.io",), timeout=None)
    err = c.open_stream({"streamtype": "error"})
    sin = c.open_stream({"streamtype": "stdin"}) if stdin else None
    sout = c.open_stream({"streamtype": "stdout"})
    serr = None if tty else c.open_stream({"streamtype": "stderr"})
    term = Terminal(0) if tty and os.isatty(0) else None
    rsz = c.open_stream({"streamtype": "resize"}) if tty else None

    def send_size(*_):
        rows, cols = term.size()
        c.send(rsz, json.dumps({"Width": cols, "Height": rows}).encode())

    if term:
        send_size()
        signal.signal(signal.SIGWINCH, send_size)
    outs = {sout: sys.stdout.buffer}
    if serr is not None:
        outs[serr] = sys.stderr.buffer
    in_open = sin is not None

    def drain():
        for sid, out in outs.items():
            data = c.data.pop(sid, b"")
            if data:
                out.write(data)
                out.flush()

    def run():
        nonlocal in_open
        while not (err in c.fin and all(s in c.fin for s in outs)) and not c.eof:
            fds = [c.sock] + ([0] if in_open else [])
            readable = select.select(fds, [], [])[0]
            if 0 in readable:
                data = os.read(0, 65536)
                c.send(sin, data, fin=not data)
                in_open = bool(data)
            if c.sock in readable:
                c._read_more()
                while frame_ready(c):
                    c.pump()
                drain()
        drain()

    try:
        if term:
            with term:
                run()
        else:
            run()
    finally:
        c.close()
    status = c.data.get(err, b"").decode()
    if not status:
        return 0
    try:
        return spdy_client.exit_code_of(status)
    except ValueError:
        print(status, file=sys.stderr)
        return None


def finish_session(code):
    if code is None:
        sys.exit(1)
    if code:
        print(f"command terminated with exit code {code}", file=sys.stderr)
    sys.exit(code)


def cmd_exec(cli, args):
    cid = container_ids(cli, [args.id])[0]
    if args.sync:
        r = cli.rt("ExecSync", pb.ExecSyncRequest(container_id=cid, cmd=args.cmd, timeout=args.exec_timeout),
                   pb.ExecSyncResponse, timeout=(args.exec_timeout or cli.timeout) + 30)
        sys.stdout.buffer.write(r.stdout)
        sys.stderr.buffer.write(r.stderr)
        sys.stdout.flush()
        finish_session(r.exit_code)
    r = cli.rt("Exec", pb.ExecRequest(container_id=cid, cmd=args.cmd, tty=args.tty, stdin=args.interactive,
                                      stdout=True, stderr=not args.tty), pb.ExecResponse)
    finish_session(stream_session(r.url, args.interactive, args.tty))


def cmd_attach(cli, args):
    cid = container_ids(cli, [args.id])[0]
    r = cli.rt("Attach", pb.AttachRequest(container_id=cid, stdin=args.interactive, tty=args.tty, stdout=True,
                                          stderr=not args.tty), pb.AttachResponse)
    finish_session(stream_session(r.url, args.interactive, args.tty))


def cmd_port_forward(cli, args):
    """Listens on 127.0.0.1:LOCAL and carries each connection to REMOTE in
    the pod over one SPDY connection (a data and an error stream each)."""
    pod = pod_ids(cli, [args.pod])[0]
    local, _, remote = args.ports.rpartition(":")
    local, remote = int(local or remote), int(remote)
    r = cli.rt("PortForward", pb.PortForwardRequest(pod_sandbox_id=pod, port=[remote]), pb.PortForwardResponse)
    c = spdy_client.Conn(r.url, ("portforward.k8s.io",), timeout=None)
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", local))
    lsock.listen(16)
    print(f"Forwarding from 127.0.0.1:{lsock.getsockname()[1]} -> {remote}", flush=True)
    by_sid, by_sock, err_sid, request = {}, {}, {}, 0

    def close_local(sid):
        s = by_sid.pop(sid, None)
        if s is not None:
            by_sock.pop(s, None)
            s.close()

    while not c.eof and not c.goaway:
        readable = select.select([lsock, c.sock] + list(by_sock), [], [])[0]
        if lsock in readable:
            s, _ = lsock.accept()
            hdr = {"streamtype": "error", "port": str(remote), "requestid": str(request)}
            e = c.open_stream(hdr)
            c.send(e, b"", fin=True)
            d = c.open_stream(dict(hdr, streamtype="data"))
            by_sid[d], by_sock[s], err_sid[d] = s, d, e
            request += 1
        for s in [s for s in readable if s in by_sock]:
            d = by_sock[s]
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            c.send(d, data, fin=not data)
            if not data:
                by_sock.pop(s)  # half-closed: the reply may still come
        if c.sock in readable:
            c._read_more()
            while frame_ready(c):
                c.pump()
            for d, s in list(by_sid.items()):
                data = c.data.pop(d, b"")
                if data:
                    try:
                        s.sendall(data)
                    except OSError:
                        close_local(d)
                        continue
                message = c.data.pop(err_sid[d], b"")
                if message:
                    print(f"port-forward error: {message.decode(errors='replace')}", file=sys.stderr)
                if d in c.fin or d in c.reset:
                    close_local(d)
    sys.exit(0)


# ------------------------------------------------------------------- main

def parser():
    p = argparse.ArgumentParser(prog="cri_cli.py", description=__doc__.split("\n\n")[0])
    p.add_argument("-r", "--runtime-endpoint")
    p.add_argument("-i", "--image-endpoint")
    p.add_argument("-t", "--timeout", default="30s")
    p.add_argument("--config")
    sub = p.add_subparsers(dest="verb", required=True)

    def verb(name, fn, *arguments, doc=True):
        s = sub.add_parser(name)
        s.set_defaults(fn=fn)
        for names, kw in arguments:
            s.add_argument(*names, **kw)
        if doc:
            s.add_argument("-o", "--output", default="json", choices=("json", "go-template", "table"))
            s.add_argument("--template")
        return s

    flag = (lambda *names: (names, {"action": "store_true"}))
    opt = (lambda *names, **kw: (names, kw))
    ids = (("ids",), {"nargs": "*"})
    verb("version", cmd_version, doc=False)
    verb("info", cmd_info)
    verb("runp", cmd_runp, opt("config"), opt("--runtime"), doc=False)
    verb("stopp", cmd_stopp, ids, flag("-a", "--all"), doc=False)
    verb("rmp", cmd_rmp, ids, flag("-a", "--all"), flag("-f", "--force"), doc=False)
    verb("pods", cmd_pods, flag("-q", "--quiet"), opt("--state"), opt("--name"), flag("--no-trunc"))
    verb("inspectp", cmd_inspectp, ids)
    verb("create", cmd_create, opt("pod"), opt("config"), opt("pod_config"), flag("--no-pull"), doc=False)
    verb("start", cmd_start, ids, doc=False)
    verb("stop", cmd_stop, ids, opt("-t", "--timeout", dest="stop_timeout", type=int, default=0), doc=False)
    verb("rm", cmd_rm, ids, flag("-a", "--all"), flag("-f", "--force"), doc=False)
    verb("ps", cmd_ps, flag("-a", "--all"), flag("-q", "--quiet"), flag("--no-trunc"), opt("--state"),
         opt("-p", "--pod"), opt("--name"))
    verb("inspect", cmd_inspect, ids)
    verb("stats", cmd_stats, opt("--id"), opt("-p", "--pod"))
    verb("statsp", cmd_statsp, opt("--id"), doc=False)
    verb("checkpoint", cmd_checkpoint, opt("id"), opt("--export", "-e", required=True), doc=False)
    verb("events", cmd_events, doc=False)
    verb("logs", cmd_logs, opt("id"), flag("-f", "--follow"), doc=False)
    verb("pull", cmd_pull, opt("image"), opt("--creds"), doc=False)
    verb("images", cmd_images, flag("-q", "--quiet"), doc=False)
    verb("inspecti", cmd_inspecti, (("images",), {"nargs": "+"}))
    verb("rmi", cmd_rmi, (("images",), {"nargs": "+"}), doc=False)
    streams = (flag("-i", "--interactive"), flag("--tty", "-t"))
    verb("exec", cmd_exec, flag("-s", "--sync"), opt("--timeout", dest="exec_timeout", type=int, default=0),
         *streams, opt("id"), opt("cmd", nargs=argparse.REMAINDER), doc=False)
    verb("attach", cmd_attach, *streams, opt("id"), doc=False)
    verb("port-forward", cmd_port_forward, opt("pod"), opt("ports"), doc=False)
    return p


def main():
    args = parser().parse_args()
    endpoint = args.runtime_endpoint or os.environ.get("CONTAINER_RUNTIME_ENDPOINT")
    config = args.config or os.environ.get("CRI_CONFIG_FILE")
    conf = read_config(config) if config and not endpoint else {}
    endpoint = endpoint or conf.get("runtime-endpoint") or "unix:///run/husk/husk.sock"
    timeout = seconds(conf.get("timeout", args.timeout)) if conf else seconds(args.timeout)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args.fn(Cli(endpoint, timeout), args)


if __name__ == "__main__":
    main()
