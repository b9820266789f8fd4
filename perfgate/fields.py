"""The name of every field perfgate stores in a benchmark's ``extra_info``, and how much
per-round data a stored run keeps. ``perfgate.benchmark`` re-exports ``Field``: writers (the
measure stage) and readers (``Benchmark``'s accessors) use these names, never a typed string.

The lab's own facts that a test records (``implementation``, ``batch``, ...) are named in
``Fact``; a test may record any other field, which the dashboard shows when it is a ratio.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

# Per-round data a run keeps per benchmark: at most this many rounds, evenly spaced in the order
# they were measured (so the noise blocks of verdict.noise stay in order). The verdict's
# bootstrap resamples no more than this many a side anyway (stats.BOOTSTRAP_POINTS, equal; this
# module imports nothing, so the measure stage names fields without loading numpy or scipy); the
# stats pytest-benchmark computes (min, max, mean, ...) stay those of every round measured.
KEPT_ROUNDS = 2000
# Parts of one --perf-shard split at most (a CI matrix is far smaller): a split's work and a
# merge's listing of the missing parts grow with it
MAX_SHARDS = 1000
PROFILE_ROWS = 15  # parts a stored profile keeps of each kind (kernels, allocation sites)
HOST_BOUND_FRACTION = 0.8  # Field.HOST_BOUND: host enqueue above this share of the device time
REDUCED_CLOCK_FRACTION = 0.95  # Field.REDUCED_CLOCK_ROUNDS: a round below this share of the
# case's highest SM clock (the verdict builds its messages from both)
ROUNDS_KEPT = "rounds_kept"  # stats field: how many of stats.rounds are in stats.data, if fewer
STORED_FUNCTIONS = 100  # Field.TOP_FUNCTIONS: each side stores at least this many, when it has them
# glibc's allocator (functions of its malloc.c): left out of the counted instructions
# (``measure.instructions``), of the function diff, and stored apart (ALLOCATOR_INSTRUCTIONS)
ALLOCATOR = "malloc.c:"
# set in the environment of a callgrind counting process (measure.callgrind): its spec.json
COUNTING_SPEC = "PERFGATE_CALLGRIND_SPEC"


class Field:
    """``extra_info`` fields written by perfgate's measure stage and the plugin."""

    DECLARATIONS = "perfgate"  # the test's marker: family, threshold, ratios
    CLOCK = "clock"  # how the rounds were timed: one of the Clock values
    ITERATIONS, ROUNDS = "iterations", "rounds"  # the plan of the timed loop
    CALLS_PER_ITERATION = "calls_per_iteration"  # rotating buffer sets per CUDA graph replay
    HOST_ENQUEUE_S = "host_enqueue_s"  # seconds the host takes to enqueue one call
    DEVICE_S = "do_bench_s"  # device seconds per call (triton's do_bench median)
    HOST_BOUND = "host_bound"  # the host enqueue took most of the device time: host-limited
    EAGER_HOST_BOUND = "eager_host_bound"  # the same, for the case run eagerly (not in a graph)
    SM_CLOCK_MHZ = "sm_clock_mhz"  # the SM clock read after each round (NVML)
    REDUCED_CLOCK_ROUNDS = "reduced_clock_rounds"  # rounds below REDUCED_CLOCK_FRACTION
    GPU = "gpu"  # the GPU that timed the case, in a merged run (Gpu: indices, uuid, name)
    WORKER, SHARD = "worker", "shard"  # the part of a merged run the case came from
    PROFILE = "profile"  # the compact per-kernel record of a profiled case
    LAUNCH_COUNTS = "launch_counts"  # kernel launches, graph launches and nodes per call
    TFLOPS, GBPS = "tflops", "gbps"  # throughput at the median time
    MEASURE = "measure"  # "instructions" for a counted case (not timed)
    INSTRUCTIONS = "instructions"  # CPU instructions per call (callgrind)
    INSTRUCTIONS_SPREAD = "instructions_spread"  # max / min - 1 over the repeats
    REPEATS, CALLS_PER_REPEAT = "repeats", "calls_per_repeat"  # how the counts were taken
    INSTRUCTIONS_BY_LAYOUT, LAYOUT = "instructions_by_layout", "layout"
    INJECTED_INSTRUCTIONS = "injected_instructions"  # gate validation: +N injected per call
    UNINJECTED_PER_CALL = "uninjected_per_call"  # the same case counted before injection
    COUNTERS = "counters"  # exact counters per call: Python calls, ATen operators, graphs
    UNCOUNTED = "uncounted"  # what could not be counted, and why
    TOP_FUNCTIONS = "top_functions"  # (function, instructions) pairs, for attribution
    ALLOCATOR_INSTRUCTIONS = "allocator_instructions"  # instructions spent in malloc and free
    CODE_PATH = "code_path"  # which implementation a dispatching case ran
    PEAK_BYTES = "peak_bytes"  # peak memory of a call (bytes)
    FORWARD_PEAK_BYTES = "forward_peak_bytes"  # peak memory of a forward pass (bytes)
    DEVICE = "device"  # the device the case ran on


class Gpu:
    """Keys of the GPU a process timed on (``RunField.GPU``; ``Field.GPU`` of a merged run's
    cases): the device torch used, found in NVML by its UUID (``measure.gpu``)."""

    INDEX, PHYSICAL_INDEX = "index", "physical_index"  # CUDA's (visible) index, NVML's (physical)
    UUID, NAME = "uuid", "name"  # "GPU-<uuid>" (nvidia-smi -L's), the model's name


class Profile:
    """Keys of ``Field.PROFILE``: a profiled case's largest parts per call."""

    CLOCK = "clock"  # "device" (kernels' GPU time), "cpu" (operators' CPU time) or PYTHON
    PYTHON = "python"  # the clock of a cProfile profile: Python functions' self time
    TIME_US, ALLOCATED_BYTES = "time_us", "allocated_bytes"  # [name, per call] pairs


class Declared:
    """Keys of a test's declarations (``Field.DECLARATIONS``, the ``perfgate`` marker)."""

    FAMILY = "family"  # the family its thresholds may be given for
    THRESHOLD = "threshold"  # the marker's threshold (a fraction)
    RATIOS = "ratios"  # same-run ratios (``Ratio.as_json``) the gate judges


RUN_FORMAT = 1  # the format of the runs this perfgate writes; older ones migrate when read


class RunField:
    """Fields of a run's ``machine_info["perfgate"]`` (``RunField.PERFGATE``), by the plugin."""

    PERFGATE = "perfgate"
    FORMAT = "format"  # RUN_FORMAT of the perfgate that wrote the run (absent: 0)
    HARDWARE_KEY = "hardware_key"  # the hardware folder the run belongs in
    SOFTWARE = "software"  # python, torch, triton, cuda, cudnn versions
    GPU_HEALTH = "gpu_health"  # available, trusted, untrusted_reasons, driver_version
    CLOCKS_LOCKED = "clocks_locked"  # --perf-lock-clocks held the GPU at its base clock
    HOST_MALLOC = "host_malloc"  # the host allocator setting of the suite
    TIER = "tier"  # the suite's --perf-tier
    SHARD = "shard"  # --perf-shard I/N: {"index": I, "count": N}
    GPU = "gpu"  # the GPU this process timed on (Gpu); a merged run: each case's Field.GPU


class Clock:
    """Values of ``Field.CLOCK``."""

    DEVICE = "cuda_graph_events"  # timing.time_device on CUDA: a kernel's GPU time
    CUDA_EVENTS = "cuda_events"  # timing.time_wall on CUDA: synchronized wall time in events
    PERF_COUNTER = "perf_counter"  # timing.time_wall on the CPU
    DISABLED, COUNTED, PROFILED = "disabled", "counted", "profiled"  # not timed


class Fact:
    """Facts the lab's tests record, read by the report."""

    IMPLEMENTATION, DTYPE, SHAPE, BATCH = "implementation", "dtype", "shape", "batch"
    MODE, VARIANT, ENCODER, SEQUENCE = "mode", "variant", "encoder", "sequence"
    ELEMENTS, GROUP_SIZE, WEIGHT_SHAPE = "elements", "group_size", "weight_shape"
    COPY_GBPS, FRACTION_OF_COPY = "copy_gbps", "fraction_of_copy"  # the copy roofline
    MIN_BYTES, STORAGE_BYTES = "min_bytes", "storage_bytes"  # bytes a kernel must move, stores
    PERSISTENT_BYTES = "persistent_bytes"  # memory held between calls (weights, caches)
    FP32_PEAK_BYTES, FP32_PERSISTENT_BYTES = "fp32_peak_bytes", "fp32_persistent_bytes"
    PEAK_SAVED, PERSISTENT_SAVED = "peak_saved_fraction", "persistent_saved_fraction"
    THEORETICAL_SAVED = "theoretical_saved_fraction"  # the format's bound on the saving
    QUANTIZABLE_SHARE = "quantizable_linear_share"  # of the weights, in quantizable Linears
    RELATIVE_ERROR = "relative_error_vs_fp32"
    MEAN_PER_CALL_S = "mean_per_call_s"
    FIRST_CALL_S, COMPILE_S = "first_call_s", "compile_s"  # torch.compile: first call, compiling
    COMPILED_STEADY_S, EAGER_STEADY_S = "compiled_steady_s", "eager_steady_s"  # per call after
    BREAK_EVEN_CALLS = "break_even_calls"  # calls after which compiling has paid for itself


class StoredFields:
    """Typed reading of a benchmark's stored fields (``extra_info``), by their names above."""

    extra_info: dict

    def number(self, name: str) -> float | None:
        """A numeric field (bools are not numbers); None when absent."""
        value = self.extra_info.get(name)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    def record(self, name: str) -> dict | None:
        """A field that holds an object (``Field.PROFILE``, ``LAUNCH_COUNTS``, ...); None when
        absent."""
        value = self.extra_info.get(name)
        return value if isinstance(value, dict) else None

    def fact(self, name: str, default: object = None) -> object:
        """A fact the test recorded (``Fact``), or any field, as stored; ``default`` when absent."""
        return self.extra_info.get(name, default)

    @property
    def top_functions(self) -> dict[str, int]:
        """Self instructions per call of the functions a counted case stored, by their
        ``stable_name`` (names that read alike summed); empty when none were stored."""
        counts: dict[str, int] = {}
        for name, count in self.extra_info.get(Field.TOP_FUNCTIONS) or []:
            counts[stable_name(name)] = counts.get(stable_name(name), 0) + count
        return counts

    @property
    def allocator_instructions(self) -> int | None:
        """Instructions per call spent in the allocator (``ALLOCATOR``), not counted."""
        return self.extra_info.get(Field.ALLOCATOR_INSTRUCTIONS)

    @property
    def uncounted(self) -> str | None:
        """What a counted case's instructions leave out, and why; None when nothing."""
        return self.extra_info.get(Field.UNCOUNTED)


def shard_problem(index: object, count: object) -> str | None:
    """Why ``index``/``count`` (a shard I/N) names no part: they must be whole numbers with
    1 <= I <= N <= MAX_SHARDS; None when it names one. The one rule of ``--perf-shard`` and of
    the ``shard`` a run records (``perfgate merge``)."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (index, count)):
        return "I and N must be whole numbers"
    if not 1 <= index <= count:
        return "I must be 1 to N"
    if count > MAX_SHARDS:
        return f"N must be at most {MAX_SHARDS}"
    return None


def stable_name(function: str) -> str:
    """A function's name as it reads in every process: JIT-generated code (oneDNN, MKL) has no
    symbol, only an address that changes from run to run, and callgrind's recursion suffix
    (``_PyEval_EvalFrameDefault'2``) changes with the call depth a wrapper adds."""
    if re.match(r"^\?\?\?:0x[0-9a-f]+ \[\?\?\?\]$", function):
        return "???:<JIT-generated code> [???]"
    return re.sub(r"'\d+(?= \[|$)", "", function)


def kept(data: list) -> list:
    """At most ``KEPT_ROUNDS`` of ``data``, evenly spaced in order, first and last included."""
    if len(data) <= KEPT_ROUNDS:
        return data
    step = (len(data) - 1) / (KEPT_ROUNDS - 1)
    return [data[round(i * step)] for i in range(KEPT_ROUNDS)]


def with_rounds_kept(entry: dict) -> dict:
    """A copy of one benchmark entry of a run's JSON whose ``stats.data`` holds only the kept
    rounds, with ``stats.rounds_kept`` saying how many when that is fewer than ``stats.rounds``;
    every other field (the exact statistics of every round) as it was."""
    stats = entry.get("stats")
    data = stats.get("data") if isinstance(stats, dict) else None
    if not isinstance(data, list) or len(data) <= KEPT_ROUNDS:
        return entry
    return {**entry, "stats": {**stats, "data": kept(data), ROUNDS_KEPT: KEPT_ROUNDS}}


def with_bounded_data(run_json: dict) -> dict:
    """A copy of a run's JSON, each benchmark's per-round data bounded (``with_rounds_kept``)."""
    benchmarks = run_json.get("benchmarks")
    if not isinstance(benchmarks, list):
        return run_json
    return {**run_json, "benchmarks": [_bounded(entry) for entry in benchmarks]}


def _bounded(entry: object) -> object:
    return with_rounds_kept(entry) if isinstance(entry, dict) else entry


@dataclass(frozen=True)
class Ratio:
    """A same-run ratio declared on a test, for the gate.

    Either a ratio to a reference case of the same test: ``key`` names the parameter that differs
    and ``reference`` its value in the reference case (``Ratio("speedup over naive",
    key="implementation", reference="naive")``); with ``higher_is_better`` the ratio is
    reference / this (a speedup), else this / reference (a relative latency). Or an ``extra_info``
    field the test stores that already is a ratio (``Ratio("fraction of copy", field=...)``).
    """

    name: str
    key: str | None = None
    reference: object = None
    field: str | None = None
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        if (self.key is None) == (self.field is None):
            raise ValueError(f"Ratio {self.name!r}: give either key and reference, or field")

    def as_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def unserializable(value: object) -> str:
    """How pytest-benchmark writes a value JSON cannot hold (a function a test is parametrized
    with), in a stored run and in a run sent between processes alike."""
    return f"UNSERIALIZABLE[{value!r}]"
