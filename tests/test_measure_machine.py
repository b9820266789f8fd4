"""measure.machine: the hardware key names a folder."""

from __future__ import annotations

from perfgate.format import slug


def test_hardware_key_is_folder_safe():
    assert slug("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert slug("AMD EPYC 7B13 (64-Core)/2cores") == "AMD-EPYC-7B13-64-Core-2cores"
