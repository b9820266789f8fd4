"""One benchmarked call, as a test hands it to pytest-benchmark's ``benchmark(fn, *args,
**kwargs)`` or ``benchmark.pedantic(target, args, kwargs, setup, teardown)``, and the one loop
that runs it for every count (callgrind's, the Python calls', the ATen operators') and for a
profile of a plain case (``plain_profile``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


def nothing() -> None:
    """A switch that switches nothing (the uncounted warm-up)."""


@dataclass(frozen=True)
class Target:
    """``fn(*args, **kwargs)``; with pedantic's ``setup``, each call gets its own arguments from
    it (when it returns ``(args, kwargs)``), and ``teardown(*args, **kwargs)`` after it."""

    fn: Callable[..., object]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    setup: Callable[[], object] | None = None
    teardown: Callable[..., object] | None = None

    def run(
        self,
        calls: int,
        start: Callable[[], object] = nothing,
        stop: Callable[[], object] = nothing,
        extra: Callable[[], object] | None = None,
    ) -> object:
        """``calls`` calls, the counted part between ``start()`` and ``stop()``: the whole loop
        without a setup or teardown, each call alone with one (setup and teardown are never
        counted). ``extra()`` follows each call, inside the counted part (gate validation).
        Returns the last call's result. ``start`` and ``stop`` should be C functions, so a
        Python profiler they switch sees no call of theirs."""
        fn, result = self.fn, None
        if self.setup is None and self.teardown is None:
            args, kwargs = self.args, self.kwargs
            start()
            try:
                for _ in range(calls):
                    result = fn(*args, **kwargs)
                    if extra is not None:
                        extra()
            finally:  # a call that raises leaves the switch off all the same
                stop()
            return result
        for _ in range(calls):
            args, kwargs = self.arguments()
            start()
            try:
                result = fn(*args, **kwargs)
                if extra is not None:
                    extra()
            finally:
                stop()
            if self.teardown is not None:
                self.teardown(*args, **kwargs)
        return result

    def arguments(self) -> tuple[tuple, dict]:
        """The arguments of one call: what ``setup()`` returns, else the given ones
        (pytest-benchmark's rule)."""
        made = self.setup() if self.setup is not None else None
        if made:
            return tuple(made[0]), dict(made[1])
        return self.args, self.kwargs
