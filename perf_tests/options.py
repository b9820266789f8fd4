"""This repository's suite options (--device, --perf-tier, --perf-malloc), apart from
perf_tests/suite.py so that they can be read without importing torch (the documentation site's
reference reads them through ``add``)."""

from __future__ import annotations

import pytest

TIER_NAMES = ("quick", "default", "full")  # the keys of suite.TIERS, in order


def add(parser: pytest.Parser) -> None:
    group = parser.getgroup("perf_tests", "this repository's benchmark matrix")
    group.addoption(
        "--device",
        choices=("cpu", "cuda", "all"),
        default="all",
        help="devices to benchmark: cpu, cuda, or all present (default: all; CPU always runs)",
    )
    group.addoption(
        "--perf-tier",
        choices=TIER_NAMES,
        default="default",
        help="size tier: quick (CI smoke), default, full (nightly GPU). Default: default",
    )
    group.addoption(
        "--perf-malloc",
        choices=("retain", "default"),
        default="retain",
        help="host allocator for CPU benchmarks: retain (glibc keeps freed memory, so calls do "
        "not page-fault their temporaries in again; steadier CPU timings) or default (glibc as "
        "configured). Default: retain",
    )
