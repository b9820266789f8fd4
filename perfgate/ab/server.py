"""The block process: one long-lived Python process per tree (and GPU) that runs a pytest session
each time it is asked, so a block costs its measurement, not a process start, the imports (torch),
a CUDA context and the collection's imports each time.

Run by path in the child (``children.start_server``), never imported as ``perfgate.ab.server``:
the tree's own ``perfgate`` (A's is older) is the one its sessions load. It imports only the
standard library and pytest. Requests come one JSON line at a time on the file descriptor in
argv[1]: ``{"args": [pytest arguments], "log": "path", "environ": {variables to set}}``; each
is answered on argv[2] with ``{"status": pytest's exit status}`` once the session ended, its
output in ``log``, or with ``{"errno": N, "error": "...", "path": "..."}`` when the session could
not write (a full disk), and then the process ends. The process ends when the requests end (the
parent closed them, or died). The variables (the tree's compile caches,
``blocks.compile_cache``) are set before the session, so before anything compiles: Inductor and
Triton read them when they first need them.

What a session leaves for the next in this process, both trees alike: imported modules (the
tests', torch's), the CUDA context, compiled kernels in memory and in the tree's compile cache
on disk (a case that measures a cold start resets them itself), the CPU's description
(py-cpuinfo's, read once: a third of a second a session); pytest-benchmark's nothing (each
session has its own). The GPU memory that torch's allocator keeps is given back after each
session, so the other tree's process on the same GPU finds it free.
"""

import copy
import functools
import gc
import json
import os
import sys


def run_session(args: list, log: str) -> int:
    """One pytest session with ``args``, stdout and stderr (the file descriptors, as a fresh
    process would have them) in ``log``."""
    import pytest

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "w", encoding="utf-8") as output:
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
        try:
            status = int(pytest.main(list(args)))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    release_memory()
    return status


def release_memory() -> None:
    """Free what the session left: its objects, and the GPU memory torch's allocator caches."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def remember_cpu_info() -> None:
    """py-cpuinfo reads the CPU in a subprocess each session; it does not change between
    blocks, so this process reads it once (each session gets its own copy)."""
    try:
        import cpuinfo
    except ImportError:
        return
    read = functools.cache(cpuinfo.get_cpu_info)
    cpuinfo.get_cpu_info = lambda: copy.deepcopy(read())


def serve(requests, replies) -> None:
    for line in requests:
        request = json.loads(line)
        os.environ.update(request.get("environ") or {})
        try:
            answer = {"status": run_session(request["args"], request["log"])}
        except OSError as error:  # its log or results could not be written: said by the parent
            path = None if error.filename is None else str(error.filename)
            answer = {"errno": error.errno, "error": error.strerror or str(error), "path": path}
        replies.write(json.dumps(answer) + "\n")
        replies.flush()
        if "error" in answer:
            break


if __name__ == "__main__":
    remember_cpu_info()
    with open(int(sys.argv[1]), encoding="utf-8") as requests:
        with open(int(sys.argv[2]), "w", encoding="utf-8") as replies:
            serve(requests, replies)
