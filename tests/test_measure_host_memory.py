"""The host allocator setting: with freed memory retained, large tensors reuse pages.

Counted in minor page faults (getrusage), not time, so the test is exact on a loaded machine.
"""

import subprocess
import sys

import pytest

from perfgate.measure import host_memory

resource = pytest.importorskip("resource")  # POSIX only

# 64 MiB tensors, above glibc's largest mmap threshold. With memory retained the heap grows for
# the first few (an aligned block does not fit exactly in the hole a freed one left), then every
# tensor fits in freed memory: count the faults of the last 10 of 40.
FAULTS_IN_STEADY_STATE = """
import resource, sys, torch
from perfgate.measure import host_memory
if sys.argv[1] == "retain":
    host_memory.retain_freed_memory()
for _ in range(30):
    torch.ones(16 * 2**20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    torch.ones(16 * 2**20)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

HUGE_PAGES_IN_640_MIB = 320


def page_faults_in_steady_state(setting: str) -> int:
    result = subprocess.run(
        [sys.executable, "-c", FAULTS_IN_STEADY_STATE, setting],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(result.stdout.strip())


@pytest.mark.skipif(host_memory._glibc() is None, reason="needs glibc's malloc")
def test_retained_memory_is_reused_without_page_faults():
    default_faults = page_faults_in_steady_state("default")
    retained_faults = page_faults_in_steady_state("retain")
    # 163,840 faults with 4 KiB pages; transparent huge pages may fault 2 MiB at a time
    assert default_faults >= HUGE_PAGES_IN_640_MIB
    assert retained_faults <= default_faults // 100


@pytest.mark.skipif(host_memory._glibc() is None, reason="needs glibc's malloc")
def test_retain_says_what_it_did():
    assert host_memory.retain_freed_memory() == "glibc, freed memory retained (mmap and trim off)"


def test_a_c_library_that_is_not_glibc_is_left_unchanged(monkeypatch):
    import ctypes.util

    # musl and macOS have no gnu_get_libc_version; here: no C library found, or one that fails
    # to load. _glibc itself runs, only the library lookup is replaced.
    for found in (None, "libperfgate-no-such-library.so.9"):
        monkeypatch.setattr(ctypes.util, "find_library", lambda name, found=found: found)
        assert host_memory._glibc() is None
        assert host_memory.retain_freed_memory() == "unchanged (not glibc)"
