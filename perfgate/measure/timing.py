"""Timing PyTorch work inside pytest-benchmark without the traps the lab measured (docs/NOTES.md).

Two clocks, chosen per benchmark:
- wall time (``time_wall``): back-to-back calls as a user feels them; on CUDA the round is read
  with CUDA events, so sync latency stays out, and a round lasts long enough (``round_seconds``)
  that the launch of its first call vanishes (its launches are counted later: launch_counts).
- device time (``time_device``): a kernel's GPU time per call; on CUDA the calls are captured in a
  CUDA graph over rotating buffers (so L2 cannot hold the working set) and the graph is replayed.

Both feed pytest-benchmark real per-round samples through ``benchmark.pedantic`` and return the
facts worth storing in ``extra_info`` (clock, iterations, host enqueue time, a ``do_bench``
cross-check on CUDA).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from perfgate import _pytest_benchmark
from perfgate.fields import HOST_BOUND_FRACTION, Clock, Field
from perfgate.measure import launch_counts, mode, nvml, profiler
from perfgate.stats import median


@dataclass(frozen=True)
class Budget:
    """How long to time one benchmark case (seconds) and how many rounds to take."""

    round_seconds: float = 0.01
    case_seconds: float = 1.0
    min_rounds: int = 10
    max_rounds: int = 200
    warmup_rounds: int = 2


def synchronize(device: torch.device) -> None:
    torch.cuda.synchronize(device) if device.type == "cuda" else None


def cuda_event_clock(seconds_per_unit: float = 1.0) -> Callable[[], float]:
    """A pytest-benchmark timer reading GPU time: seconds since the clock was made.

    Each reading records a CUDA event and waits for it, so the difference of two readings is the
    GPU time between them, whatever the host did. ``seconds_per_unit`` scales the reading (a
    graph of k calls replayed once reads as k times shorter with ``1 / k``).
    """
    origin = torch.cuda.Event(enable_timing=True)
    origin.record()

    def cuda_event_clock() -> float:
        now = torch.cuda.Event(enable_timing=True)
        now.record()
        now.synchronize()
        return origin.elapsed_time(now) / 1000.0 * seconds_per_unit

    return cuda_event_clock


def seconds_per_call(fn: Callable[[], object], device: torch.device, calls: int = 3) -> float:
    """Synchronized wall seconds per call of ``fn``, from ``calls`` calls after one warm-up."""
    fn()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) / calls


def host_enqueue_seconds(fn: Callable[[], object], device: torch.device, calls: int) -> float:
    """Host seconds per call to enqueue ``fn``, without waiting for the GPU."""
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    synchronize(device)
    return elapsed / calls


def plan_rounds(call_seconds: float, budget: Budget) -> tuple[int, int]:
    """(rounds, iterations per round) so a round lasts ``round_seconds`` and a case its budget."""
    iterations = max(1, math.ceil(budget.round_seconds / max(call_seconds, 1e-9)))
    round_cost = iterations * call_seconds
    rounds = int(budget.case_seconds / max(round_cost, 1e-9))
    return min(max(rounds, budget.min_rounds), budget.max_rounds), iterations


def do_bench_seconds(fn: Callable[[], object]) -> float:
    """Median device seconds per call by ``triton.testing.do_bench`` (events, L2 flushed)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") / 1000.0


def time_wall(benchmark, fn: Callable[[], object], device: torch.device, budget: Budget) -> dict:
    """Benchmark ``fn`` by synchronized wall time; returns facts for ``extra_info``."""
    now = mode.of(benchmark)  # a pass after the main loop profiles or counts instead of timing
    if (profiled := profiler.instead_of_timing(benchmark, fn, device, now)) is not None:
        return profiled
    if device.type == "cuda" and now.counting:
        return launch_counts.count_case(benchmark, fn, device, now)
    if benchmark.disabled:  # --benchmark-disable runs the body once, untimed
        benchmark.pedantic(fn)
        synchronize(device)
        return {Field.CLOCK: Clock.DISABLED}
    call_seconds = seconds_per_call(fn, device)
    rounds, iterations = plan_rounds(call_seconds, budget)
    facts = {Field.CLOCK: Clock.PERF_COUNTER, Field.ITERATIONS: iterations, Field.ROUNDS: rounds}
    clocks = None
    if device.type == "cuda":
        now.countable.add(benchmark.fullname)  # its launches: counted after the loop
        clocks = use_cuda_clock(benchmark, cuda_event_clock())
        host = host_enqueue_seconds(fn, device, max(iterations, 3))
        device_seconds = do_bench_seconds(fn)
        facts |= {
            Field.CLOCK: Clock.CUDA_EVENTS,
            Field.HOST_ENQUEUE_S: host,
            Field.DEVICE_S: device_seconds,
            Field.HOST_BOUND: host > HOST_BOUND_FRACTION * device_seconds,
        }
    benchmark.pedantic(fn, rounds=rounds, iterations=iterations, warmup_rounds=budget.warmup_rounds)
    return facts | (clocks.facts(rounds) if clocks else {})


def use_cuda_clock(benchmark, clock: Callable[[], float]) -> nvml.RoundClocks | None:
    """Time ``benchmark`` with ``clock``, reading the SM clock between rounds where NVML is."""
    clocks = nvml.round_clocks()
    _pytest_benchmark.set_timer(benchmark, clocks.wrap(clock) if clocks else clock)
    return clocks


def time_device(
    benchmark, calls: Sequence[Callable[[], object]], device: torch.device, budget: Budget
) -> dict:
    """Benchmark a kernel's time per call; ``calls`` use rotating buffers, one call per set.

    On CUDA the calls are captured into one CUDA graph, replayed per iteration, and the clock
    reports GPU seconds per captured call. On the CPU this is wall time over the rotation.
    """
    rotation = _Rotation(calls)
    now = mode.of(benchmark)
    if (profiled := profiler.instead_of_timing(benchmark, rotation, device, now)) is not None:
        return profiled
    if benchmark.disabled or device.type != "cuda":
        return time_wall(benchmark, rotation, device, budget)
    graph = capture_graph(calls, device)
    per_call = seconds_per_call(graph.replay, device) / len(calls)
    rounds, iterations = plan_rounds(per_call * len(calls), budget)
    host = host_enqueue_seconds(rotation, device, max(3 * len(calls), 30))
    device_seconds = do_bench_seconds(calls[0])
    clocks = use_cuda_clock(benchmark, cuda_event_clock(1.0 / len(calls)))
    benchmark.pedantic(
        graph.replay, rounds=rounds, iterations=iterations, warmup_rounds=budget.warmup_rounds
    )
    return (clocks.facts(rounds) if clocks else {}) | {
        Field.CLOCK: Clock.DEVICE,
        Field.CALLS_PER_ITERATION: len(calls),
        Field.ITERATIONS: iterations,
        Field.ROUNDS: rounds,
        Field.HOST_ENQUEUE_S: host,
        Field.DEVICE_S: device_seconds,
        Field.HOST_BOUND: False,  # a graph replay takes the host out of the loop
        Field.EAGER_HOST_BOUND: host > HOST_BOUND_FRACTION * device_seconds,
    }


class _Rotation:
    """Calls each of ``calls`` in turn, one per call: rotating buffers outside a graph."""

    def __init__(self, calls: Sequence[Callable[[], object]]):
        if not calls:
            raise ValueError("calls must hold at least one callable")
        self.calls = list(calls)
        self.index = 0

    def __call__(self) -> object:
        call = self.calls[self.index]
        self.index = (self.index + 1) % len(self.calls)
        return call()


def rotation_count(bytes_per_call: int, cache_bytes: int, minimum: int = 2) -> int:
    """Buffer sets to rotate through so their footprint is at least 4x the cache."""
    return max(minimum, math.ceil(4 * cache_bytes / max(bytes_per_call, 1)))


def scaled_perf_counter(seconds_per_unit: float) -> Callable[[], float]:
    """A perf_counter timer whose readings are scaled: per-call seconds for n-call rounds."""

    def scaled_perf_counter() -> float:
        return time.perf_counter() * seconds_per_unit

    return scaled_perf_counter


def time_rounds(
    benchmark, round_fn: Callable[[], object], device: torch.device, rounds: int, calls: int
) -> None:
    """Time whole rounds that are expensive by themselves (a fresh compile, then ``calls`` calls).

    One iteration per round; the reading is divided by ``calls``, so pytest-benchmark stores the
    mean seconds per call of each round. ``round_fn`` must end with the device synchronized.
    """
    (now := mode.of(benchmark)).unprofiled.add(benchmark.fullname)
    if now.profiling():  # a fresh compile per round: into files only
        if now.profile_dir is not None:
            profiler.profile_calls(benchmark, round_fn, device, now, calls=1)
        return profiler.skip(benchmark)  # no result either way
    if benchmark.disabled:
        benchmark.pedantic(round_fn)
        return
    _pytest_benchmark.set_timer(benchmark, scaled_perf_counter(1.0 / calls))
    benchmark.pedantic(round_fn, rounds=rounds, iterations=1, warmup_rounds=0)


def copy_bandwidth_gbps(total_bytes: int, device: torch.device) -> float:
    """Measured device-to-device copy bandwidth (GB/s, bytes read + written) moving ``total_bytes``.

    This is the roofline of a memory-bound kernel that moves the same number of bytes, timed as
    ``time_device`` times kernels on CUDA: a CUDA graph over rotating buffers (>= 4x L2). Timed
    with ``do_bench`` instead (L2 flushed, a launch gap per call), copies of a few MB read 15 %
    slower than the graph-timed kernels they bound, which then showed above 100 % of the copy.
    """
    half = max(total_bytes // 2, 1)
    if device.type != "cuda":
        source = torch.randint(0, 255, (half,), dtype=torch.uint8, device=device)
        target = torch.empty_like(source)
        seconds = min(seconds_per_call(lambda: target.copy_(source), device, 5) for _ in range(3))
        return 2 * half / seconds / 1e9
    sets = rotation_count(2 * half, l2_cache_bytes(device))
    words = max(half // 4, 1)  # int32 words: PyTorch's uint8 copy is slower at a few MB
    pairs = [
        (
            torch.ones(words, dtype=torch.int32, device=device),
            torch.empty(words, dtype=torch.int32, device=device),
        )
        for _ in range(sets)
    ]
    calls = [lambda pair=pair: pair[1].copy_(pair[0]) for pair in pairs]
    return 2 * 4 * words / graph_seconds_per_call(calls, device) / 1e9


def capture_graph(calls: Sequence[Callable[[], object]], device: torch.device):
    """A CUDA graph of ``calls``, each run once before (compile and autotune outside the
    capture) and the graph once after, so its first timed replay is warm."""
    for call in calls:
        call()
    synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    graph.replay()
    synchronize(device)
    return graph


def graph_seconds_per_call(calls: Sequence[Callable[[], object]], device: torch.device) -> float:
    """GPU seconds per call of ``calls`` captured once into a CUDA graph: the median of 20
    replays, each read with CUDA events."""
    graph = capture_graph(calls, device)
    durations = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        durations.append(start.elapsed_time(end) / 1000.0 / len(calls))
    return median(durations)


def measured_median(benchmark) -> float | None:
    """Median seconds per call the benchmark measured, None when it did not time."""
    samples = _pytest_benchmark.samples(benchmark)
    return median(samples) if samples else None


def record_rates(benchmark, *, flops: int | None = None, nbytes: int | None = None) -> None:
    """Add TFLOP/s and GB/s at the median time to ``extra_info`` (nothing when timing was off)."""
    samples = _pytest_benchmark.samples(benchmark)
    if not samples:
        return
    seconds = median(samples)
    if flops is not None:
        benchmark.extra_info[Field.TFLOPS] = flops / seconds / 1e12
    if nbytes is not None:
        benchmark.extra_info[Field.GBPS] = nbytes / seconds / 1e9


def l2_cache_bytes(device: torch.device) -> int:
    """L2 size of a CUDA device (50 MB on the H100 when PyTorch does not report it)."""
    properties = torch.cuda.get_device_properties(device)
    return getattr(properties, "L2_cache_size", 50 * 2**20)
