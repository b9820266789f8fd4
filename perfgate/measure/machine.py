"""What machine this is: the hardware key that names a baseline folder, and the software around it.

The key names hardware only (GPU model, or CPU model and core count). Software versions are not
part of it: they go into the saved machine info and are shown beside every comparison, because a
dependency upgrade is one of the regressions the suite exists to catch.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

from perfgate.format import slug
from perfgate.measure import nvml


def cpu_model() -> str:
    """The CPU's model name, from /proc/cpuinfo where there is one."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown-cpu"


def hardware_key(use_cuda: bool) -> str:
    """The baseline folder name for this machine: the GPU when CUDA runs, else CPU and cores."""
    if use_cuda:
        import torch  # only for a session on CUDA: a CPU session never imports it

        if torch.cuda.is_available():
            return slug(torch.cuda.get_device_name(torch.cuda.current_device()))
    return slug(f"{cpu_model()}-{os.cpu_count()}cores")


def this_machine_key() -> str:
    """This machine's hardware key, for a command outside pytest (a session has its own): its
    GPU where torch sees one, else its CPU. Imports torch where installed: ask only when a key
    is needed."""
    try:
        import torch
    except ImportError:  # perfgate without its torch extra: a CPU key
        return hardware_key(use_cuda=False)
    return hardware_key(use_cuda=torch.cuda.is_available())


def software_versions() -> dict:
    """Versions that change performance without changing hardware: Python always; torch, CUDA,
    cuDNN and Triton where the session imported torch (a session without it does not pay for
    importing it here)."""
    versions = {"python": platform.python_version()}
    torch = sys.modules.get("torch")
    if torch is None:
        return versions
    versions.update(
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    )
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = None
    return versions


GPU_QUERY_FIELDS = (
    "name",
    "driver_version",
    "temperature.gpu",
    "clocks.sm",
    "clocks.max.sm",
    "clocks.mem",
    "power.draw",
    "utilization.gpu",
    "clocks_throttle_reasons.active",
)
# Throttle reasons that slow a run for reasons outside the code (NVML's and nvidia-smi's mask):
# 0x8 hardware slowdown, 0x20 software thermal, 0x40 hardware thermal, 0x80 power brake.
# Idle (0x1) and the software power cap (0x4, normal under full load) are not listed.
UNTRUSTED_THROTTLE_MASK = 0x8 | 0x20 | 0x40 | 0x80


def gpu_health() -> dict:
    """Clocks, temperature, throttle reasons and other processes of the GPU this process times
    on (``nvml.selected``: ``measure.gpu`` selects torch's device by UUID), through NVML when
    pynvml is installed (``perfgate[gpu]``), else by nvidia-smi; ``source`` says which.

    ``trusted`` is False when the GPU throttles for heat or power or another process uses it (a
    process on another GPU of the host does not count): such a run is reported, not gated.
    Neither NVML nor nvidia-smi gives ``{"available": False}``.
    """
    gpu = nvml.device()
    if gpu is not None:
        try:
            return _judged(*_nvml_health(gpu))
        except gpu.nvml.NVMLError:
            pass  # a driver that answers some queries only: nvidia-smi may still answer
    if shutil.which("nvidia-smi") is None:
        return {"available": False}
    fields = _nvidia_smi(["--query-gpu=" + ",".join(GPU_QUERY_FIELDS)])
    if fields is None:
        return {"available": False}
    health = dict(zip(GPU_QUERY_FIELDS, (f.strip() for f in fields[0].split(",")), strict=False))
    processes = _nvidia_smi(["--query-compute-apps=pid,process_name,used_memory"]) or []
    own = str(os.getpid())
    others = [p.strip() for p in processes if p.strip() and p.split(",")[0].strip() != own]
    return _judged({**health, "source": "nvidia-smi"}, others)


def _nvml_health(gpu: nvml.Device) -> tuple[dict, list[str]]:
    """The nvidia-smi fields, read through NVML (same names, so saved runs read alike)."""
    reading = gpu.read()
    health = {
        "name": gpu.name(),
        "driver_version": gpu.driver_version(),
        "temperature.gpu": str(reading.temperature_c),
        "clocks.sm": str(reading.sm_clock_mhz),
        "clocks.max.sm": str(reading.max_sm_clock_mhz),
        "clocks.mem": str(reading.memory_clock_mhz),
        "power.draw": f"{reading.power_w:.2f}",
        "utilization.gpu": str(gpu.utilization_percent()),
        "clocks_throttle_reasons.active": f"{reading.throttle_reasons:#018x}",
        "source": "nvml",
    }
    return health, gpu.other_processes(os.getpid())


def _judged(health: dict, others: list[str]) -> dict:
    throttle = _parse_int(health.get("clocks_throttle_reasons.active", ""))
    reasons = []
    if throttle is not None and throttle & UNTRUSTED_THROTTLE_MASK:
        reasons.append(f"GPU throttling (reasons {throttle:#x})")
    if others:
        reasons.append(f"other processes on the GPU: {'; '.join(others)}")
    return {
        "available": True,
        **health,
        "other_processes": others,
        "trusted": not reasons,
        "untrusted_reasons": reasons,
    }


def _nvidia_smi(arguments: list[str]) -> list[str] | None:
    try:
        result = subprocess.run(
            ["nvidia-smi", f"--id={nvml.selected()}", *arguments, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip().splitlines()


def _parse_int(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None
