# Sourced by the CRI test helpers and `make conformance`: SIGKILLs what a
# huskd work dir left running — every process whose command line names the
# dir (huskd, monitors, pause, plugins), whose root is inside it, or whose
# mount namespace has its "/" on a mount naming the dir (a container's
# processes after pivot_root: their root reads as "/") — and the extra
# pids given.  DIR must be an absolute path other than / (an empty one
# would match everything).  One python3 reads /proc once and kills in one pass (a
# process per pid was slow on a loaded host); the calling shell and the
# python itself are never killed.  KILL_PROCS_DRY_RUN=1 prints the pids
# instead.
#
#   kill_procs_of DIR [PID...]
kill_procs_of() {
	python3 - "$$" "$@" <<'PY'
import os, signal, sys

if len(sys.argv) < 3 or not sys.argv[2].startswith("/") or sys.argv[2].rstrip("/") == "":
    # An empty DIR would name every process on the host.
    sys.exit(f"kill_procs_of: DIR must be an absolute path below /, got {sys.argv[2:3]}")
shell, target, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
needle = target.encode()
me = str(os.getpid())
dry = os.environ.get("KILL_PROCS_DRY_RUN") == "1"


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def link(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


def pivoted_into_dir(pid):
    """A root of "/" in another mount namespace whose "/" mount names the dir."""
    info = read(f"/proc/{pid}/mountinfo") or b""
    for line in info.splitlines():
        fields = line.split(b" ")
        if len(fields) > 4 and fields[4] == b"/" and needle + b"/" in line:
            return True
    return False


own_mnt = link("/proc/self/ns/mnt")
victims = [p for p in extra if p not in (shell, me)]
for pid in os.listdir("/proc"):
    if not pid.isdigit() or pid == me:
        continue
    cmdline = read(f"/proc/{pid}/cmdline")
    root = link(f"/proc/{pid}/root")
    if pid != shell and cmdline is not None and needle in cmdline:
        victims.append(pid)
    elif root is not None and root.startswith(target + "/"):
        victims.append(pid)
    elif root == "/" and link(f"/proc/{pid}/ns/mnt") != own_mnt and pivoted_into_dir(pid):
        victims.append(pid)
for pid in dict.fromkeys(victims):
    if dry:
        print(pid)
        continue
    try:
        os.kill(int(pid), signal.SIGKILL)
    except (OSError, ValueError):
        pass
PY
}
