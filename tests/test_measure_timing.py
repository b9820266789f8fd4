"""measure.timing's pure helpers: the rounds plan, buffer rotation past the cache, the copy
roofline."""

from __future__ import annotations

import pytest
import torch

from perfgate.measure import timing
from perfgate.measure.timing import Budget, copy_bandwidth_gbps, plan_rounds, rotation_count


def test_plan_rounds_fills_a_round_and_respects_the_round_limits():
    budget = Budget(round_seconds=0.01, case_seconds=1.0, min_rounds=10, max_rounds=100)
    assert plan_rounds(1e-4, budget) == (100, 100)  # 100 calls a round, 1 s / 10 ms = 100 rounds
    assert plan_rounds(0.5, budget) == (10, 1)  # slow call: one per round, at least 10 rounds


def test_rotation_count_outgrows_the_cache_four_times():
    assert rotation_count(bytes_per_call=3 * 2**20, cache_bytes=50 * 2**20) == 67
    assert rotation_count(bytes_per_call=2**30, cache_bytes=50 * 2**20) == 2


@pytest.mark.parametrize("total_bytes", [2**22, 2**22 + 1])
def test_copy_roofline_on_the_cpu_is_bytes_moved_over_the_fastest_of_three_copies(
    total_bytes, monkeypatch
):
    # Each timing really runs the copy; the clock is replaced by known seconds per call, so the
    # roofline's arithmetic (bytes read + written, the fastest of three timings) is exact.
    copied, seconds = [], iter([4e-3, 1e-3, 2e-3])

    def timed(fn, device, calls):
        copied.append(fn())
        return next(seconds)

    monkeypatch.setattr(timing, "seconds_per_call", timed)
    gbps = copy_bandwidth_gbps(total_bytes, torch.device("cpu"))
    half = total_bytes // 2
    assert gbps == 2 * half / 1e-3 / 1e9
    assert len(copied) == 3
    assert all(t.dtype == torch.uint8 and t.numel() == half for t in copied)
    assert copied[0].any()  # it copied random bytes, not an empty buffer


@pytest.mark.gpu
@pytest.mark.parametrize("total_bytes", [2**21, 2**28])
def test_copy_roofline_on_cuda_is_a_plausible_bandwidth(total_bytes):
    gbps = copy_bandwidth_gbps(total_bytes, torch.device("cuda"))
    assert 10 < gbps < 20_000
