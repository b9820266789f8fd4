"""Ctrl-C and SIGTERM in a pytest session that asked for perfgate: the documented exit 2, one
line, and the run measured so far kept, whenever the signal comes.

While cases run (the main loop and the passes after it), SIGTERM (a CI runner's cancel or
timeout) interrupts as Ctrl-C does: pytest stops, and the run measured so far is put aside in
``perfgate-results/unsaved/``. Once they are done, there is nothing left to stop: from then on
until pytest is done (the save, the gate's reports, the terminal summary, ``pytest_unconfigure``)
both signals are held, the run is saved or put aside as it would have been, and the session then
exits 2 with one line saying so, never with a traceback.
"""

from __future__ import annotations

import contextlib
import signal
import threading

import pytest

from perfgate import _pytest_benchmark
from perfgate.session.baseline import warn
from perfgate.store.saving import held_signals


def loop_ended(config: pytest.Config, stopped: bool, workers_measured: bool = False) -> None:
    """After the main loop (``stopped``: by Ctrl-C or SIGTERM): results without a round (a
    Ctrl-C in a case's first one) are dropped; where none is left, pytest-benchmark is told to
    save nothing, and one line says so (its own "Not saving anything" warning would be a
    traceback under ``filterwarnings = error``), unless ``workers_measured``: an xdist
    controller times nothing itself, and saves its workers' merged run on its own."""
    _pytest_benchmark.drop_unmeasured(config)
    if _pytest_benchmark.save_nothing(config) and not workers_measured:
        stopped_how = (
            "interrupted before any case was measured" if stopped else "no case was measured"
        )
        warn(config, f"perfgate: {stopped_how}: nothing saved or kept")


class Interrupts:
    """The session's signal handling; ``start`` at configure time, ``hold`` after the loop."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.session: pytest.Session | None = None
        self.held = contextlib.ExitStack()
        self.received: list[str] = []
        self.owned = not hasattr(config, "workerinput")  # an xdist worker: its controller's
        self.owned &= threading.current_thread() is threading.main_thread()

    def start(self) -> None:
        """SIGTERM interrupts as Ctrl-C does (unless the process handles it itself); one
        cleanup, run after every ``pytest_unconfigure``, restores both signals."""
        if not self.owned:
            return
        self.config.add_cleanup(self._end)
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def interrupt(number, frame):
            raise KeyboardInterrupt("SIGTERM")

        signal.signal(signal.SIGTERM, interrupt)
        self.held.callback(signal.signal, signal.SIGTERM, signal.SIG_DFL)

    def hold(self, session: pytest.Session) -> None:
        """From now until pytest is done, hold SIGINT and SIGTERM (the main loop is over)."""
        if self.owned and self.session is None:
            self.session = session
            self.received = self.held.enter_context(held_signals())

    def _end(self) -> None:
        self.held.close()  # the held handlers first, then SIGTERM's own
        if self.received and self.session is not None:
            warn(
                self.config,
                f"perfgate: {self.received[0]} after the last test was held until "
                "pytest was done (the run is saved or kept as said above); exit 2",
            )
            self.session.exitstatus = pytest.ExitCode.INTERRUPTED
