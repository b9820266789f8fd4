"""The hook a project implements (in its conftest.py) to tell perfgate what it runs on."""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_perfgate_uses_cuda(config: pytest.Config) -> bool | None:
    """True when this session benchmarks on a CUDA device: the run's hardware key (its folder
    under perfgate_baselines, and the key saved with the run) then names the GPU, and its GPU
    health is recorded. Without an answer perfgate takes the CPU (and never imports torch)."""
