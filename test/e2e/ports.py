"""Host ports for the tests' CNI port mappings: the machine is shared, so
a fixed port collides with another run's (portmap's DNAT rules bind
nothing, so the kernel cannot tell).  free_host_port() takes a port the
kernel hands out as free on 127.0.0.1 that no iptables NAT rule names yet,
never the same one twice in a run."""
import socket
import subprocess

_given = set()


def _nat_rules():
    try:
        return subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def free_host_port():
    rules = _nat_rules()
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given and f"--dport {port} " not in rules and not rules.endswith(f"--dport {port}"):
            _given.add(port)
            return port
    raise RuntimeError("no free host port for a port mapping")
