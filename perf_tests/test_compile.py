"""torch.compile: ResNet-18 eager vs compiled, in steady state and over n calls from a cold start.

- ``test_resnet18_steady``: compilation happens in warm-up, outside the measurement; wall time per
  call as a user feels it.
- ``test_resnet18_calls``: each round resets Dynamo, gives Inductor and Triton empty caches, then
  makes ``calls`` consecutive calls. The stored figure is the mean seconds per call over the
  round, compile included (the lab's ``n``); ``extra_info`` holds the mean after each checkpoint
  n of the same rounds, the compile seconds and the break-even number of calls.
"""

from __future__ import annotations

import time

import pytest
import torch
from torch._inductor.utils import fresh_inductor_cache

from perf_tests.models import ResNet18
from perfgate import Ratio
from perfgate.measure.timing import (
    measured_median,
    seconds_per_call,
    synchronize,
    time_rounds,
    time_wall,
)
from perfgate.stats import median

pytestmark = pytest.mark.perfgate(
    family="compile",
    ratios=[Ratio("speedup of compiled over eager", key="mode", reference="eager")],
)

TIERED_PARAMETERS = {
    "batch": {
        ("cpu", "quick"): [1],
        ("cpu", "default"): [1, 8],
        ("cpu", "full"): [1, 8, 32],
        ("cuda", "quick"): [1],
        ("cuda", "default"): [1, 32, 128],
        ("cuda", "full"): [1, 32, 128],
    },
    "calls": {  # calls per cold-start round; the batch is AMORTIZATION_BATCH
        ("cpu", "quick"): [2],
        ("cpu", "default"): [200],
        ("cpu", "full"): [200],
        ("cuda", "quick"): [2],
        ("cuda", "default"): [500],
        ("cuda", "full"): [2000],
    },
}
AMORTIZATION_BATCH = {"cpu": 1, "cuda": 128}
AMORTIZATION_ROUNDS = {"quick": 1, "default": 3, "full": 2}
CHECKPOINTS = (1, 5, 50, 200, 500, 1000, 2000)  # the lab's n values, and more where it pays
MODES = ["eager", "compiled"]


@pytest.fixture(scope="module")
def resnet18():
    """``resnet18(device)``: one eval-mode ResNet-18 per device, random weights, seeded."""
    models = {}

    def on(device: torch.device) -> torch.nn.Module:
        if device.type not in models:
            torch.manual_seed(0)
            models[device.type] = ResNet18().eval().to(device)
        return models[device.type]

    return on


def compile_fresh(model: torch.nn.Module) -> torch.nn.Module:
    torch._dynamo.reset()
    return torch.compile(model, dynamic=False)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_resnet18_steady(benchmark, bench_device, perf_budget, resnet18, batch, mode):
    device = bench_device
    model = resnet18(device)
    x = torch.randn(batch, 3, 224, 224, device=device)
    with torch.inference_mode():
        expected = model(x)
        run = model if mode == "eager" else compile_fresh(model)
        start = time.perf_counter()
        out = run(x)
        synchronize(device)
        first_call = time.perf_counter() - start
        error = ((out - expected).norm() / expected.norm()).item()
        assert error < 1e-2, f"compiled output differs from eager by {error:.2e}"
        benchmark.group = f"resnet18 steady batch {batch} {device.type}"
        facts = time_wall(benchmark, lambda: run(x), device, perf_budget)
    benchmark.extra_info.update(
        facts, mode=mode, batch=batch, device=device.type, first_call_s=first_call
    )
    if (seconds := measured_median(benchmark)) is not None:
        benchmark.extra_info["images_per_s"] = batch / seconds


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_resnet18_calls(benchmark, bench_device, perf_tier, resnet18, calls, mode):
    device = bench_device
    model = resnet18(device)
    batch = AMORTIZATION_BATCH[device.type]
    x = torch.randn(batch, 3, 224, 224, device=device)
    checkpoints = [n for n in CHECKPOINTS if n <= calls]
    curves: list[list[float]] = []  # per round: seconds from the start to each checkpoint
    last = {}

    def cold_start_round() -> None:
        with fresh_inductor_cache():
            run = last["run"] = model if mode == "eager" else compile_fresh(model)
            start, curve = time.perf_counter(), []
            for n in range(1, calls + 1):
                run(x)
                if n in checkpoints:
                    synchronize(device)
                    curve.append(time.perf_counter() - start)
            curves.append(curve)

    with torch.inference_mode():
        if mode == "compiled" and not benchmark.disabled:
            cold_start_round()  # one-time process costs (imports, toolchain checks) stay out
            curves.clear()
        benchmark.group = f"resnet18 {calls} calls from cold, batch {batch} {device.type}"
        time_rounds(benchmark, cold_start_round, device, AMORTIZATION_ROUNDS[perf_tier], calls)
        steady = seconds_per_call(lambda: model(x), device, 5)
        run_steady = seconds_per_call(lambda: last["run"](x), device, 5)

    first_call = median([curve[0] for curve in curves])
    benchmark.extra_info.update(
        mode=mode,
        batch=batch,
        calls=calls,
        device=device.type,
        mean_per_call_s={
            str(n): median([curve[i] for curve in curves]) / n for i, n in enumerate(checkpoints)
        },
        first_call_s=first_call,
        eager_steady_s=steady,
    )
    if mode == "compiled":
        compile_seconds = max(first_call - run_steady, 0.0)
        saving = steady - run_steady
        benchmark.extra_info.update(
            compile_s=compile_seconds,
            compiled_steady_s=run_steady,
            break_even_calls=compile_seconds / saving if saving > 0 else None,
        )
