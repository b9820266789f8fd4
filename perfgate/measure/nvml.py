"""GPU clocks, power, temperature and throttle reasons through NVML (``nvidia-ml-py``, imported
as ``pynvml``; ``pip install 'perfgate[gpu]'``), and locking the GPU clocks for a session.

Without pynvml, or without a driver, ``device()`` is None and callers fall back (``machine``
parses nvidia-smi; the timers record no clocks). Every NVML call goes through this module.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass

from perfgate.fields import REDUCED_CLOCK_FRACTION, Field

# NVML's "clock limit" id for the base (TDP) clock, which nvbench's --lgc base locks to.
CLOCK_LIMIT_ID_TDP = 0xFFFFFF01


@dataclass(frozen=True)
class Reading:
    """One look at the GPU: clocks (MHz), power (W), temperature (C), throttle reasons (mask)."""

    sm_clock_mhz: int
    max_sm_clock_mhz: int
    memory_clock_mhz: int
    power_w: float
    temperature_c: int
    throttle_reasons: int

    def as_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class HostGpu:
    """One GPU of the host as NVML knows it, whatever CUDA_VISIBLE_DEVICES hides."""

    index: int  # NVML's index, nvidia-smi's: PCI bus order
    uuid: str  # "GPU-<uuid>", as nvidia-smi -L prints it and CUDA_VISIBLE_DEVICES takes it
    name: str


class Device:
    """One GPU through an initialized NVML: ``key`` is its UUID ("GPU-...") or NVML's index."""

    def __init__(self, nvml, key: int | str = 0):
        self.nvml = nvml
        if isinstance(key, str):  # bytes: pynvml before 11.5 passes the argument to C as is
            self.handle = nvml.nvmlDeviceGetHandleByUUID(key.encode())
        else:
            self.handle = nvml.nvmlDeviceGetHandleByIndex(key)

    def sm_clock_mhz(self) -> int:
        """The SM clock now (MHz): one cheap call, for reading between rounds."""
        return int(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))

    def throttle_reasons(self) -> int:
        nvml = self.nvml
        read = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        read = read or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(read(self.handle))

    def read(self) -> Reading:
        nvml, handle = self.nvml, self.handle
        return Reading(
            sm_clock_mhz=self.sm_clock_mhz(),
            max_sm_clock_mhz=int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
            memory_clock_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
            power_w=nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,  # NVML reports mW
            temperature_c=int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
            throttle_reasons=self.throttle_reasons(),
        )

    def name(self) -> str:
        return _text(self.nvml.nvmlDeviceGetName(self.handle))

    def uuid(self) -> str:
        return _text(self.nvml.nvmlDeviceGetUUID(self.handle))

    def driver_version(self) -> str:
        return _text(self.nvml.nvmlSystemGetDriverVersion())

    def utilization_percent(self) -> int:
        return int(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)

    def other_processes(self, own_pid: int) -> list[str]:
        """'pid (MiB)' of each other compute process on the GPU."""
        processes = self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
        return [
            f"pid {p.pid} ({(p.usedGpuMemory or 0) // 2**20} MiB)"
            for p in processes
            if p.pid != own_pid
        ]

    def lock_base_clocks(self) -> str | None:
        """Lock the GPU clocks at the base (TDP) clock; None on success, else one line why not."""
        nvml = self.nvml
        base = getattr(nvml, "NVML_CLOCK_LIMIT_ID_TDP", CLOCK_LIMIT_ID_TDP)
        try:
            nvml.nvmlDeviceSetGpuLockedClocks(self.handle, base, base)
        except nvml.NVMLError as error:
            return f"NVML refused to lock the GPU clocks ({error}): {_advice(nvml, error)}"
        return None

    def reset_locked_clocks(self) -> str | None:
        """Undo ``lock_base_clocks``; None on success, else one line why not."""
        try:
            self.nvml.nvmlDeviceResetGpuLockedClocks(self.handle)
        except self.nvml.NVMLError as error:
            return f"NVML could not reset the locked GPU clocks ({error}): run nvidia-smi -rgc"
        return None


def _advice(nvml, error) -> str:
    value = getattr(error, "value", None)
    if value == getattr(nvml, "NVML_ERROR_NO_PERMISSION", 4):
        return "it needs root (or sudo nvidia-smi -lgc base once)"
    if value == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3):
        return "this GPU or driver does not support locked clocks"
    return "see nvidia-smi -q -d CLOCK"


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_device: Device | None = None
_tried = False
_key: int | str = 0  # the GPU this process times on: its UUID once measure.gpu selected it


def select(key: int | str) -> None:
    """Read this GPU from now on: its UUID ("GPU-...", as measure.gpu selects it) or NVML's
    index (nvidia-smi's numbering)."""
    global _key
    _key = key
    forget()


def selected() -> int | str:
    """The selected GPU as nvidia-smi's ``--id`` takes it: a UUID, or an index (0 unselected)."""
    return _key


def device() -> Device | None:
    """The selected GPU (index 0 unless ``select``) through NVML, initialized once; None
    without pynvml, a working driver, or a GPU of that UUID."""
    global _device, _tried
    if not _tried:
        _tried = True
        _device = _open(_initialized())
    return _device


def _open(nvml) -> Device | None:
    if nvml is None:
        return None
    try:
        return Device(nvml, _key)
    except nvml.NVMLError:
        return None


def host_gpus() -> list[HostGpu]:
    """Every GPU of the host in NVML's order; empty without pynvml or a working driver."""
    nvml = _initialized()
    if nvml is None:
        return []
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        return [
            HostGpu(i, _text(nvml.nvmlDeviceGetUUID(h)), _text(nvml.nvmlDeviceGetName(h)))
            for i, h in enumerate(handles)
        ]
    except nvml.NVMLError:
        return []


def is_mig_instance(uuid: str) -> bool:
    """Whether NVML knows ``uuid`` (CUDA's form: hex digits, no prefix) as a MIG instance."""
    nvml = _initialized()
    if nvml is None:
        return False
    try:
        nvml.nvmlDeviceGetHandleByUUID(f"MIG-{uuid}".encode())
    except nvml.NVMLError:
        return False
    return True


def _initialized():
    """pynvml with NVML initialized (NVML counts its initializations); None without it."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None
    return nvml


def forget() -> None:
    """Look for NVML again on the next ``device()`` (tests swap pynvml in and out)."""
    global _device, _tried
    _device, _tried = None, False


class RoundClocks:
    """The SM clock after every round of one benchmark case.

    ``wrap`` gives a pytest-benchmark timer that reads the clock after each round's closing
    reading (pytest-benchmark reads its timer once at a round's start and once at its end), so
    the read sits between rounds, never inside a timed interval. Rounds read below
    REDUCED_CLOCK_FRACTION of the case's highest reading are flagged, not dropped: the samples
    stay as measured, and the gate does not gate a case with many of them.
    """

    def __init__(self, gpu: Device):
        self.gpu = gpu
        self.readings: list[int] = []
        self._calls = 0

    def wrap(self, timer):
        def timer_reading_clocks() -> float:
            now = timer()
            self._calls += 1
            if self._calls % 2 == 0:
                self.readings.append(self.gpu.sm_clock_mhz())
            return now

        return timer_reading_clocks

    def facts(self, rounds: int) -> dict:
        """``sm_clock_mhz`` per timed round and ``reduced_clock_rounds`` (how many were read
        below REDUCED_CLOCK_FRACTION of the highest), for ``extra_info``."""
        clocks = self.readings[-rounds:]  # the warm-up rounds come first
        if not clocks:
            return {}
        floor = REDUCED_CLOCK_FRACTION * max(clocks)
        reduced = sum(c < floor for c in clocks)
        return {Field.SM_CLOCK_MHZ: clocks, Field.REDUCED_CLOCK_ROUNDS: reduced}


def round_clocks() -> RoundClocks | None:
    gpu = device()
    return RoundClocks(gpu) if gpu is not None else None


def lock_base_clocks_for_session() -> tuple[str, object]:
    """Lock the selected GPU's clocks at base for this session: (one line to show, the undo or
    None)."""
    gpu = device()
    if gpu is None:
        return (
            "perfgate: --perf-lock-clocks: NVML is not available (pip install 'perfgate[gpu]' "
            "on a machine with the NVIDIA driver); going on with unlocked clocks",
            None,
        )
    if problem := gpu.lock_base_clocks():
        return f"perfgate: --perf-lock-clocks: {problem}; going on with unlocked clocks", None

    def undo() -> None:
        if problem := gpu.reset_locked_clocks():
            print(f"perfgate: {problem}")

    return "perfgate: GPU clocks locked at base (NVML); reset when the session ends", undo
