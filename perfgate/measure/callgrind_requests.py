"""Callgrind's client requests from Python: switch instrumentation and collection on and off and
dump the counts from inside the counted process, at an exact point of the program.

The requests are macros of valgrind's header ``valgrind/callgrind.h`` (special instruction
sequences that do nothing outside valgrind), so they need C: a four-function library is compiled
with the system's C compiler on first use, cached per user (``cache_folder``), and loaded with
ctypes. It needs no torch, so a pure-Python project is counted the same way as a PyTorch one.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HEADER = "valgrind/callgrind.h"
SOURCE = f"""\
#include <{HEADER}>
void perfgate_start_instrumentation(void) {{ CALLGRIND_START_INSTRUMENTATION; }}
void perfgate_stop_instrumentation(void) {{ CALLGRIND_STOP_INSTRUMENTATION; }}
void perfgate_toggle_collect(void) {{ CALLGRIND_TOGGLE_COLLECT; }}
void perfgate_dump_stats(void) {{ CALLGRIND_DUMP_STATS; }}
"""
LIBRARY_NAME = "callgrind_requests.so"  # its name in the counting process's private folder


class RequestsUnavailable(Exception):
    """The library cannot be built here; the message says what is missing, in one line."""


def compiler() -> str | None:
    """The C compiler: $CC, else cc or gcc on PATH."""
    named = os.environ.get("CC", "").split()
    for candidate in [*named[:1], "cc", "gcc"]:
        if found := shutil.which(candidate):
            return found
    return None


def cache_folder() -> Path:
    """Where the compiled library is kept: $XDG_CACHE_HOME/perfgate, else ~/.cache/perfgate."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base, "perfgate")


def build(folder: Path | None = None) -> Path:
    """The compiled library, built on first use (a source and header are built once per cache
    folder); RequestsUnavailable, saying what to install, where it cannot be."""
    cc = compiler()
    if cc is None:
        raise RequestsUnavailable(
            "no C compiler (cc) to build perfgate's callgrind switch: install one "
            "(`apt-get install gcc`) or name it in $CC"
        )
    digest = hashlib.sha256(SOURCE.encode() + _header(cc).read_bytes()).hexdigest()
    folder = folder or cache_folder()
    library = folder / f"callgrind-requests-{digest[:16]}.so"
    if library.exists():
        return library
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        source, built = Path(scratch, "requests.c"), Path(scratch, "requests.so")
        source.write_text(SOURCE)
        command = [cc, "-O1", "-shared", "-fPIC", "-o", str(built), str(source)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no output"])[0]
            raise RequestsUnavailable(f"{cc} could not build perfgate's callgrind switch: {first}")
        os.replace(built, library)  # atomic: sessions building at once all find a whole file
    return library


def _header(cc: str) -> Path:
    """valgrind/callgrind.h where the compiler finds it."""
    done = subprocess.run(
        [cc, "-M", "-x", "c", "-"], input=f"#include <{HEADER}>\n", capture_output=True, text=True
    )
    found = [word for word in done.stdout.split() if word.endswith(HEADER)]
    if done.returncode != 0 or not found:
        raise RequestsUnavailable(
            "valgrind's header valgrind/callgrind.h is missing: install valgrind with its "
            "headers (`apt-get install valgrind`; valgrind-devel on Fedora)"
        )
    return Path(found[0])


class Requests:
    """The loaded library: callgrind's switches as plain calls (C functions through ctypes, so
    a Python profiler sees no Python call in them)."""

    def __init__(self, library: Path):
        loaded = ctypes.CDLL(str(library))
        self.start_instrumentation = _function(loaded, "perfgate_start_instrumentation")
        self.stop_instrumentation = _function(loaded, "perfgate_stop_instrumentation")
        self.toggle_collect = _function(loaded, "perfgate_toggle_collect")
        self.dump_stats = _function(loaded, "perfgate_dump_stats")


def _function(library: ctypes.CDLL, name: str):
    function = getattr(library, name)
    function.argtypes, function.restype = [], None
    return function
