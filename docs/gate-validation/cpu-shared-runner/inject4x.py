"""A 4x slowdown of ONE case, injected from outside the project: `-p inject4x` with this file's
folder on PYTHONPATH. INJECT4X_NODE is the case's exact pytest node id; INJECT4X_FUNC names what
the case benchmarks, `module:Owner.attr` (an attribute of an importable module or class) or
`@module:attr` (a global of the test's own module). While that case runs (its re-runs too), each
call runs the original 4 times: 3 calls of extra work, the same result."""

import importlib
import os

import pytest


def _owner(request: pytest.FixtureRequest, spec: str) -> tuple[object, str]:
    module, _, path = spec.partition(":")
    owner = request.module if module == "@module" else importlib.import_module(module)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


@pytest.fixture(autouse=True)
def _inject4x(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.nodeid != os.environ.get("INJECT4X_NODE"):
        return
    owner, name = _owner(request, os.environ["INJECT4X_FUNC"])
    original = getattr(owner, name)

    def four_times(*args, **kwargs):
        for _ in range(3):
            original(*args, **kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, four_times)
