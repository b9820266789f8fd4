"""perfgate: a pytest-benchmark harness that times PyTorch work correctly and gates regressions."""

from importlib import metadata

try:  # the installed distribution's version: from the git tag it was built at (setuptools-scm)
    __version__ = metadata.version("perfgate")
except metadata.PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
__all__ = ["Ratio"]


def __getattr__(name: str):
    """``perfgate.Ratio``, the same-run ratio a test declares, from the model (loaded on first
    use, so that ``import perfgate`` stays light)."""
    if name == "Ratio":
        from perfgate.fields import Ratio

        return Ratio
    raise AttributeError(f"module 'perfgate' has no attribute {name!r}")
