"""What every ``perfgate`` command does before and around its work: check its output paths
before anything is measured or read, and turn SIGTERM (what CI runners send on a timeout) into
the same KeyboardInterrupt as Ctrl-C, so that one cleanup (worktrees, half-built sites) runs
for both."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading

from perfgate.outputs import check_file, check_folder


class CommandError(Exception):
    """What a command was asked cannot be done; the message is one line that says what to do,
    printed as ``perfgate NAME: error: ...`` (or ``label``), and the command exits ``status``."""

    def __init__(self, message: str, status: int = 2, label: str = "error"):
        super().__init__(message)
        self.status, self.label = status, label


def check_outputs(args: argparse.Namespace, err) -> None:
    """BadOutput (one line) for an --out or --summary that cannot be written."""
    out = getattr(args, "out", None)
    if out is not None and not getattr(args, "no_plots", False):
        check = check_file if args.handler.out_is_file else check_folder
        check(out, "--out")
    summary = getattr(args, "summary", None)
    if summary is not None and str(summary) in ("", "."):
        print(
            f"perfgate {args.command}: --summary is empty (an unset variable?): no summary "
            "is appended",
            file=err,
        )
        args.summary = None
    elif summary is not None:
        check_file(summary, "--summary")


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises KeyboardInterrupt (in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(number, frame):
        raise KeyboardInterrupt(signal.Signals(number).name)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
