"""perfgate: a pytest-benchmark harness that times PyTorch work correctly and gates regressions."""

__version__ = "0.1.0"
