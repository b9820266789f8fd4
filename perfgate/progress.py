"""Progress of work that can take more than a few seconds (the A/B's blocks, bisect's steps, the
runs that dashboard, history and merge read): on a terminal a tqdm bar with the elapsed time and
an estimate of what remains; elsewhere (a CI log) one plain line per step, or nothing at all for
work that is short (``lines=False``). Notes are printed as text: control characters are shown
as escapes (``format.terminal``), so a name from a stored run never moves the cursor or colours
the terminal."""

from __future__ import annotations

import time
from collections.abc import Callable

from perfgate.format import terminal


def on_terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def printable(text: str) -> str:
    """``text`` with every control character (escape sequences, carriage returns) shown as an
    escape such as ``\\x1b``: ``format.terminal``, the one terminal escape."""
    return terminal(text)


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``: a duration for people, in whole seconds."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class Progress:
    """``total`` steps of one piece of work, called ``label``. ``step(note)`` after each; ``grow``
    when more steps turn out to be needed. On a terminal ``stream`` a tqdm bar; otherwise a plain
    line per step when ``lines``, else nothing. ``clock``: seconds, for the estimate."""

    def __init__(
        self,
        total: int,
        label: str,
        stream,
        lines: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.done, self.label = total, 0, printable(label)
        self.stream, self.lines, self.clock = stream, lines, clock
        self.started = clock()
        self._bar = None
        if on_terminal(stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=self.label, file=stream, dynamic_ncols=True)

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    def remaining_s(self) -> float | None:
        """Seconds left at the pace so far (None before the first step)."""
        if not self.done:
            return None
        return self.elapsed_s() / self.done * max(self.total - self.done, 0)

    def grow(self, steps: int) -> None:
        self.total += steps
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()

    def step(self, note: str = "", steps: int = 1) -> None:
        self.done += steps
        if self._bar is not None:
            self._bar.set_postfix_str(printable(note), refresh=False)
            self._bar.update(steps)
        elif self.lines:
            left = self.remaining_s()
            pace = f"{duration(self.elapsed_s())} elapsed"
            pace += f", about {duration(left)} left" if left is not None else ""
            note = f": {printable(note)}" if note else ""
            print(
                f"{self.label} {self.done}/{self.total}{note} ({pace})",
                file=self.stream,
                flush=True,
            )

    def write(self, line: str) -> None:
        """A line of its own (a phase), printed without breaking the bar (nothing where
        neither a bar nor lines are shown)."""
        if self._bar is not None:
            self._bar.write(printable(line), file=self.stream)
        elif self.lines:
            print(printable(line), file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
