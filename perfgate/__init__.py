"""perfgate: a pytest-benchmark harness that times PyTorch work correctly and gates regressions."""

__version__ = "0.1.0"
__all__ = ["Ratio"]


def __getattr__(name: str):
    """``perfgate.Ratio``, the same-run ratio a test declares, from the model (loaded on first
    use, so that ``import perfgate`` stays light)."""
    if name == "Ratio":
        from perfgate.fields import Ratio

        return Ratio
    raise AttributeError(f"module 'perfgate' has no attribute {name!r}")
