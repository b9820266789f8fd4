"""What the harness's pages share: the file name of one benchmark's page or plot, and the
patterns that choose benchmarks by name."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Sequence

from perfgate.format import slug

STEM_CHARACTERS = 100  # of a benchmark's name in its file names (a file name holds 255 bytes)


def file_stem(fullname: str) -> str:
    """A file name for one benchmark's page or plot: its test and parameters, readable, and a
    hash of its full id, so that ``a/test_io.py::test_read[small]`` and
    ``b/test_net.py::test_read[small]`` never share a file."""
    digest = hashlib.sha1(fullname.encode("utf-8")).hexdigest()[:8]
    readable = slug(fullname.split("::")[-1], "plot")[:STEM_CHARACTERS].rstrip("-")
    return f"{readable}-{digest}"


def matches(names: Sequence[str], patterns: Sequence[str]) -> bool:
    """True when any pattern matches any name: a glob, else a substring (any case)."""
    return any(
        fnmatch.fnmatchcase(name, pattern) or pattern.lower() in name.lower()
        for pattern in patterns
        for name in names
    )
