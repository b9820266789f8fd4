"""Keep freed host memory inside the process while CPU benchmarks run.

glibc's malloc gives any block above its mmap threshold (32 MiB at most) back to the kernel on
free, so a CPU call that allocates large temporaries page-faults them in again, every call. On
the 2-core VM this suite is developed on, a fresh 64 MiB tensor took 17 ms (page faults and
zeroing) against 2 ms with memory kept, the MXINT8 reference Linear 130-180 ms against 50 ms,
and the page-fault cost swung by up to 40 % with the host's load: it made CPU baselines
unrepeatable (docs/NOTES.md, "CPU noise"). Switching glibc's mmap and trimming off keeps freed
memory for reuse, as jemalloc and tcmalloc (PyTorch's CPU tuning guide recommends them) do.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_MAX = -4
LARGEST_TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int
DEFAULT = "glibc default"


def retain_freed_memory() -> str:
    """Make glibc's malloc keep freed memory in the process; say what the allocator now does.

    Returns a short description for the run's machine info. On another C library (macOS,
    musl) nothing changes and the description says so.
    """
    libc = _glibc()
    if libc is None:
        return "unchanged (not glibc)"
    mmap_off = libc.mallopt(M_MMAP_MAX, 0) == 1
    trim_off = libc.mallopt(M_TRIM_THRESHOLD, LARGEST_TRIM_THRESHOLD) == 1
    if not (mmap_off and trim_off):
        return "unchanged (glibc refused mallopt)"
    return "glibc, freed memory retained (mmap and trim off)"


def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc
