"""What every e2e script shares: TAP output for test/run-all.sh and the
catching of gRPC errors."""
import sys

import grpc

_failures = 0


def ok(cond, name, diag=""):
    """Prints `ok - NAME` or `not ok - NAME` with up to 10 diagnostic lines."""
    global _failures
    print(("ok - " if cond else "not ok - ") + name, flush=True)
    if not cond:
        _failures += 1
        for line in str(diag).splitlines()[:10]:
            print("#   " + line)


def rpc_error(fn):
    """Calls FN; returns the grpc.RpcError it raised, or None."""
    try:
        fn()
    except grpc.RpcError as e:
        return e
    return None


def exit_status():
    """Exits 1 when any check failed, else 0."""
    sys.exit(1 if _failures else 0)
