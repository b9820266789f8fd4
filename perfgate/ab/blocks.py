"""The parent's side of the block processes (``server``): one per tree and GPU, started at its
first request, asked for the collection and then for each block, closed at the end (or killed,
on an interrupt). A block's results are pytest-benchmark's ``--benchmark-json``, read through the
store; the GPU health it records does not count the A/B's own processes as others on the GPU
(the other tree's process on the same GPU, idle while this one runs).

Each tree's processes compile into a cache of that tree's own (``compile_cache``: Inductor's
and Triton's, kept with the A/B's blocks): a case that compiles in its warm-up pays the
compilation in its tree's first block, and its later blocks (and a resumed A/B's) load what was
compiled; the two trees never share one, so neither reuses the other's work. A case that times
a cold start gives itself empty caches (``torch._inductor.utils.fresh_inductor_cache``), as it
must anyway, and keeps paying it."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

from perfgate.ab import AbError, children
from perfgate.benchmark import Run
from perfgate.fields import RunField
from perfgate.store import StoreError, read_results

NO_TESTS_COLLECTED = 5  # pytest's exit status
SESSION = ["-q", "-p", "no:cacheprovider"]
OTHERS = "other processes on the GPU"  # how the measure stage words the reason (machine.py)
FULL = os.strerror(errno.ENOSPC)  # "No space left on device", as Python words it in a traceback


def not_written(path: Path, error: OSError) -> AbError:
    """The one line for a file of the A/B that could not be written (``error``): a full disk
    said as such; the completed blocks are kept for ``--resume``."""
    cause = "the disk is full" if error.errno == errno.ENOSPC else error.strerror
    return AbError(
        f"cannot write {path} ({cause}): free space (or fix the folder), then run it "
        "again with --resume to keep the blocks completed so far"
    )


COMPILE_CACHE = "compile-cache"  # beside the blocks: one folder per tree


def compile_cache(folder: Path, label: str) -> dict[str, str]:
    """The environment that gives tree ``label``'s block processes their own compile caches,
    under ``folder``: Inductor's (TORCHINDUCTOR_CACHE_DIR: compiled graphs, autotuning) and
    Triton's (TRITON_CACHE_DIR: compiled kernels)."""
    tree = folder / COMPILE_CACHE / label
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(tree / "inductor"),
        "TRITON_CACHE_DIR": str(tree / "triton"),
    }


class BlockProcess:
    """The block process of tree ``label`` (``tree``) on ``gpu`` (None: no GPU set); its
    sessions run with ``compile_cache(folder, label)`` in their environment."""

    def __init__(self, tree: Path, label: str, gpu: str | None, folder: Path):
        self.tree, self.label, self.gpu, self.folder = tree, label, gpu, folder
        self.environ = compile_cache(folder, label)
        self.process: subprocess.Popen | None = None
        self._requests = self._replies = None

    @property
    def where(self) -> str:
        return f"tree {self.label}" + (f" on GPU {self.gpu}" if self.gpu is not None else "")

    @property
    def log(self) -> Path:
        """The process's own output (a session's is in its block's log)."""
        return self.folder / f"process-{self.label}-{self.gpu or 'any'}.log".replace("/", "_")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def session(self, args: list[str], log: Path) -> int:
        """Run one pytest session with ``args`` in the process; its exit status."""
        if self.process is None:
            try:
                self.process, request_fd, reply_fd = children.start_server(
                    self.tree, self.gpu, self.log
                )
            except OSError as error:
                raise not_written(self.log, error) from None
            self._requests = os.fdopen(request_fd, "w", encoding="utf-8")
            self._replies = os.fdopen(reply_fd, encoding="utf-8")
        try:
            request = {"args": args, "log": str(log), "environ": self.environ}
            self._requests.write(json.dumps(request) + "\n")
            self._requests.flush()
            reply = self._replies.readline()
        except (OSError, ValueError):  # closed under us: an interrupt is stopping the A/B
            reply = ""
        if not reply:
            if self.disk_was_full(log):
                raise not_written(log, OSError(errno.ENOSPC, FULL))
            raise AbError(
                f"the block process of {self.where} ended; its output is in {log} and {self.folder}"
            )
        answer = json.loads(reply)
        if "error" in answer:  # the session could not write its output
            raise not_written(
                Path(answer.get("path") or log), OSError(answer.get("errno"), answer["error"])
            )
        return int(answer["status"])

    def disk_was_full(self, log: Path) -> bool:
        """Whether the process ended on a full disk: its logs say so, or they could not."""
        for path in (log, self.log):
            try:
                with open(path, "rb") as output:
                    output.seek(max(path.stat().st_size - 65536, 0))
                    if FULL.encode() in output.read():
                        return True
            except OSError:
                pass
        try:
            return os.statvfs(self.folder).f_bavail == 0
        except OSError:
            return False

    def close(self, kill: bool = False) -> None:
        """End the process: its requests end (it exits), or at once with ``kill``."""
        if self.process is None:
            return
        if kill:
            self.process.kill()
        for stream in (self._requests, self._replies):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def collect(
    process: BlockProcess, selection: list[str], pytest_args: list[str], log: Path
) -> list[str]:
    """The node ids that ``selection`` (test paths, -k) and ``pytest_args`` collect in the
    process's tree; AbError when pytest cannot collect them."""
    args = [
        *SESSION,
        "--collect-only",
        "-p",
        "no:warnings",
        *selection,
        *block_arguments(pytest_args),
    ]
    status = process.session(args, log)
    if status == NO_TESTS_COLLECTED:
        return []
    if status != 0 and process.disk_was_full(log):
        raise not_written(log, OSError(errno.ENOSPC, FULL))
    if status != 0:
        raise AbError(
            f"collecting the cases of {process.where} failed (pytest exited {status}); "
            f"its output is in {log}"
        )
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    return [line.strip() for line in lines if "::" in line and not line.startswith(" ")]


def run_block(
    process: BlockProcess, names: list[str], pytest_args: list[str], report: Path, log: Path
) -> Run:
    """One block: the cases ``names`` (node ids) in one session of the process; its results."""
    args = [*SESSION, f"--benchmark-json={report}", *block_arguments(pytest_args), *names]
    status = process.session(args, log)
    if (status != 0 or not report.is_file()) and process.disk_was_full(log):
        raise not_written(report, OSError(errno.ENOSPC, FULL))
    if status != 0 or not report.is_file():
        raise AbError(f"a block of {process.where}: pytest exited {status}; its output is in {log}")
    try:
        return read_results(report)
    except StoreError as error:
        raise AbError(f"a block of {process.where}: unreadable results: {error}") from None


# what a block session leaves out of the pytest arguments: it runs the cases it is given, in its
# own process (a shard's part and xdist's workers are the stored comparison's)
NOT_IN_A_BLOCK = ("--perf-shard", "-n", "--numprocesses", "--dist")


def block_arguments(pytest_args: list[str]) -> list[str]:
    """``pytest_args`` without ``NOT_IN_A_BLOCK``, given as ``--opt VALUE``, ``--opt=VALUE`` or
    ``-nVALUE``."""
    kept, values = [], iter(pytest_args)
    for arg in values:
        if arg in NOT_IN_A_BLOCK:
            next(values, None)  # its value
        elif arg.partition("=")[0] not in NOT_IN_A_BLOCK and not _WORKERS.fullmatch(arg):
            kept.append(arg)
    return kept


_WORKERS = re.compile(r"-n\w+")
_PID = re.compile(r"^\s*(?:pid\s+)?(\d+)")


def without_our_processes(run: Run, pids: set[int]) -> Run:
    """``run`` with the A/B's own block processes (``pids``) no longer counted as other
    processes on its GPU; the GPU stays untrusted for any other reason."""
    health = run.gpu_health
    others = list(health.get("other_processes") or [])
    kept = [p for p in others if not ((m := _PID.match(str(p))) and int(m.group(1)) in pids)]
    if len(kept) == len(others):
        return run
    reasons = [r for r in health.get("untrusted_reasons") or [] if not r.startswith(OTHERS)]
    reasons += [f"{OTHERS}: {'; '.join(kept)}"] if kept else []
    health = {
        **health,
        "other_processes": kept,
        "trusted": not reasons,
        "untrusted_reasons": reasons,
    }
    facts = {**run.perfgate, RunField.GPU_HEALTH: health}
    return replace(run, machine_info={**run.machine_info, RunField.PERFGATE: facts})
