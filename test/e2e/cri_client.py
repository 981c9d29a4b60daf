"""What the CRI e2e scripts share: a gRPC client of runtime.v1 on a unix
socket, huskd started on a temp socket/root/state, and the pod and
container configs they run.  Import it after putting the generated
api_pb2 (protoc's output in WORK/gen) on sys.path."""
import os
import socket
import signal
import subprocess
import time

import grpc

import api_pb2 as pb


class Client:
    """runtime.v1 calls over one channel to unix://SOCKET_PATH."""

    def __init__(self, socket_path, options=None):
        self.socket_path, self.options = socket_path, options
        self.channel = grpc.insecure_channel("unix://" + socket_path, options=options)

    def reconnect(self):
        """A new channel (to a restarted daemon); the old one is closed."""
        self.channel.close()
        self.channel = grpc.insecure_channel("unix://" + self.socket_path, options=self.options)

    def call(self, method, request, reply_type, timeout=60, service="RuntimeService"):
        """REPLY_TYPE None: the reply's bytes, unparsed."""
        fn = self.channel.unary_unary(f"/runtime.v1.{service}/{method}",
                                      request_serializer=lambda m: m.SerializeToString(),
                                      response_deserializer=reply_type.FromString if reply_type else None)
        return fn(request, timeout=timeout, wait_for_ready=True)

    def stream(self, method, request, reply_type, timeout=60, service="RuntimeService", raw=False):
        """The response iterator of a server stream; RAW sends REQUEST as bytes."""
        fn = self.channel.unary_stream(f"/runtime.v1.{service}/{method}",
                                       request_serializer=(lambda b: b) if raw else (lambda m: m.SerializeToString()),
                                       response_deserializer=reply_type.FromString)
        return fn(request, timeout=timeout, wait_for_ready=True)

    def pull(self, image, timeout=120):
        self.call("PullImage", pb.PullImageRequest(image=pb.ImageSpec(image=image)), pb.PullImageResponse,
                  timeout=timeout, service="ImageService")

    def run_pod(self, config, timeout=60):
        return self.call("RunPodSandbox", pb.RunPodSandboxRequest(config=config),
                         pb.RunPodSandboxResponse, timeout=timeout).pod_sandbox_id

    def stop_pod(self, pod, timeout=60):
        self.call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=pod), pb.StopPodSandboxResponse,
                  timeout=timeout)

    def remove_pod(self, pod, timeout=60):
        self.call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=pod),
                  pb.RemovePodSandboxResponse, timeout=timeout)

    def create(self, pod, config, sandbox_config, timeout=60):
        return self.call("CreateContainer", pb.CreateContainerRequest(
            pod_sandbox_id=pod, config=config, sandbox_config=sandbox_config),
            pb.CreateContainerResponse, timeout=timeout).container_id

    def start(self, cid, timeout=60):
        self.call("StartContainer", pb.StartContainerRequest(container_id=cid), pb.StartContainerResponse,
                  timeout=timeout)

    def stop(self, cid, timeout=10):
        self.call("StopContainer", pb.StopContainerRequest(container_id=cid, timeout=timeout),
                  pb.StopContainerResponse, timeout=timeout + 30)

    def remove(self, cid):
        self.call("RemoveContainer", pb.RemoveContainerRequest(container_id=cid), pb.RemoveContainerResponse)

    def status(self, cid):
        return self.call("ContainerStatus", pb.ContainerStatusRequest(container_id=cid),
                         pb.ContainerStatusResponse).status

    def list(self, **filter_args):
        """The ids of the containers ListContainers gives for FILTER_ARGS."""
        f = pb.ContainerFilter(**filter_args) if filter_args else None
        return [c.id for c in self.call("ListContainers", pb.ListContainersRequest(filter=f),
                                        pb.ListContainersResponse).containers]

    # The streaming RPCs: each gives a one-time URL on the runtime's
    # streaming server.
    def exec_url(self, cid, cmd, stdin=False, stdout=True, stderr=True, tty=False):
        return self.call("Exec", pb.ExecRequest(container_id=cid, cmd=cmd, stdin=stdin, stdout=stdout,
                                                stderr=stderr, tty=tty), pb.ExecResponse).url

    def attach_url(self, cid, stdin=True, stdout=True, stderr=True, tty=False):
        return self.call("Attach", pb.AttachRequest(container_id=cid, stdin=stdin, stdout=stdout, stderr=stderr,
                                                    tty=tty), pb.AttachResponse).url

    def pf_url(self, pod, ports):
        return self.call("PortForward", pb.PortForwardRequest(pod_sandbox_id=pod, port=ports),
                         pb.PortForwardResponse).url

    def exec_sync(self, cid, cmd, timeout=0):
        return self.call("ExecSync", pb.ExecSyncRequest(container_id=cid, cmd=cmd, timeout=timeout),
                         pb.ExecSyncResponse, timeout=timeout + 30 if timeout else 60)


def wait_listening(sock, timeout, proc=None):
    """Waits until something accepts on SOCK, trying every 50 ms, or PROC
    exits.  gRPC's own wait retries with exponential backoff (1 s, 1.6 s,
    2.6 s, ...), so a huskd that took 16 s to start under load was seen
    only at 26 s, past a 30 s budget half the time.  Returns the seconds
    waited, or None when it never listened."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc is not None and proc.poll() is not None:
            return None
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sock)
            return time.monotonic() - start
        except OSError:
            time.sleep(0.05)
        finally:
            s.close()
    return None


def open_channel(sock, ready_timeout=30, proc=None, log=None):
    """A channel to a (re)started huskd that is ready to use: its own
    subchannel pool (the process-wide one keeps the dead huskd's connection
    in reconnect backoff, failing calls with "Connection refused" for a
    while, longer under ASan), opened once huskd listens.  When it never
    gets ready, the error says whether huskd PROC exited and ends with its
    LOG's last lines."""
    waited = wait_listening(sock, ready_timeout, proc)
    channel = grpc.insecure_channel("unix://" + sock, options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        if waited is None:
            raise grpc.FutureTimeoutError()
        grpc.channel_ready_future(channel).result(timeout=max(ready_timeout - waited, 5))
    except grpc.FutureTimeoutError:
        channel.close()
        state = "running" if proc is None or proc.poll() is None else f"exited with {proc.returncode}"
        tail = ""
        if log and os.path.exists(log):
            with open(log, errors="replace") as f:
                tail = " | ".join(f.read().splitlines()[-6:])
        raise RuntimeError(f"huskd on {sock} not ready after {ready_timeout} s (huskd {state}): {tail}") from None
    if waited > 5:
        print(f"# huskd on {sock} took {waited:.1f} s to listen")
    return channel


def start_huskd(huskd, work, sock, root, state, config, ignored_signals=()):
    """huskd on SOCK, logging to WORK/huskd.log, its pid in WORK/huskd.pid
    (for the shell's trap); returns once the socket exists (10 s at most).
    IGNORED_SIGNALS: set to SIG_IGN in huskd's starter, as a supervisor may."""
    def ignore():
        for sig in ignored_signals:
            signal.signal(sig, signal.SIG_IGN)

    log = open(os.path.join(work, "huskd.log"), "a")
    proc = subprocess.Popen([huskd, "--listen", "unix://" + sock, "--root", root, "--state", state,
                             "--config", config], stdout=log, stderr=log,
                            preexec_fn=ignore if ignored_signals else None)
    with open(os.path.join(work, "huskd.pid"), "w") as f:
        f.write(str(proc.pid))
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    return proc


def stop_huskd(proc):
    """SIGTERM, then SIGKILL after 20 s."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def pod_config(name, log_root, namespace="husk-test", attempt=0, network=pb.POD, labels=None, annotations=None,
               cgroup_parent=""):
    """A pod of its own network namespace (or NETWORK), ipc of the pod and
    a pid namespace per container, logging under LOG_ROOT/NAME."""
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, namespace=namespace, uid="uid-" + name, attempt=attempt),
        hostname=name, log_directory=os.path.join(log_root, name), labels=labels or {},
        annotations=annotations or {},
        linux=pb.LinuxPodSandboxConfig(cgroup_parent=cgroup_parent, security_context=pb.LinuxSandboxSecurityContext(
            namespace_options=pb.NamespaceOption(network=network, ipc=pb.POD, pid=pb.CONTAINER))))


def container_config(name, image, args, sc=None, command=("/bin/sh", "-c"), attempt=0, **fields):
    """COMMAND ARGS of IMAGE logging to NAME.log; a linux security context
    only where SC is given; FIELDS (labels, annotations, mounts, ...) go to
    the ContainerConfig as they are."""
    if sc is not None:
        fields["linux"] = pb.LinuxContainerConfig(security_context=sc)
    fields.setdefault("log_path", name + ".log")
    return pb.ContainerConfig(metadata=pb.ContainerMetadata(name=name, attempt=attempt),
                              image=pb.ImageSpec(image=image), command=list(command), args=args, **fields)
