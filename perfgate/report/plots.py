"""PNG plots for ``perfgate history`` (matplotlib, Agg backend), and the two helpers every plot
uses: ``pyplot`` (matplotlib, or one line saying how to install it) and ``save``.

matplotlib is imported on first use, so every other command works without it; each function
takes plain numbers (seconds, GB/s, fractions) and the path to write, and returns that path.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perfgate.format import time_unit

DPI = 110


class PlotsUnavailable(RuntimeError):
    """matplotlib is missing; the message says how to install it."""


def pyplot():
    """matplotlib.pyplot on the Agg backend; PlotsUnavailable (one line) without matplotlib."""
    try:
        import matplotlib
    except ImportError as error:
        raise PlotsUnavailable(
            "the plots need matplotlib, which is not installed: pip install matplotlib "
            "(or pip install 'perfgate[report]'), or pass --no-plots"
        ) from error
    matplotlib.use("Agg", force=True)  # files only, never a window
    import matplotlib.pyplot as plt

    return plt


def save(plt, figure, path: Path) -> Path:
    """Write ``figure`` to ``path`` (its folder made) and close it; the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(figure)
    return path


def history_plot(
    path: Path,
    title: str,
    labels: Sequence[str],
    medians: Sequence[float | None],
    quartiles: Sequence[tuple[float, float] | None],
    changes: Sequence[tuple[int, str]],
) -> Path:
    """Median seconds per call of one benchmark per run, bars from q1 to q3; ``changes`` are
    (run index, description) of environment changes, drawn as vertical lines before that run."""
    plt = pyplot()
    known = [m for m in medians if m is not None]
    unit, scale = time_unit(max(known)) if known else ("s", 1.0)
    figure, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(labels) + 3), 4.2))
    xs = [i for i, m in enumerate(medians) if m is not None]
    ys = [medians[i] / scale for i in xs]
    low = [ys[j] - (quartiles[i][0] / scale if quartiles[i] else ys[j]) for j, i in enumerate(xs)]
    high = [(quartiles[i][1] / scale if quartiles[i] else ys[j]) - ys[j] for j, i in enumerate(xs)]
    ax.errorbar(xs, ys, yerr=[low, high], fmt="o-", capsize=4, label="median (bars: q1 to q3)")
    for number, (index, text) in enumerate(changes):
        ax.axvline(
            index - 0.5,
            color="tab:red",
            linestyle="--",
            linewidth=1,
            label="environment changed" if number == 0 else None,
        )
        ax.annotate(
            text,
            (index - 0.5, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(-4, -4),
            textcoords="offset points",
            rotation=90,
            rotation_mode="anchor",
            va="bottom",
            ha="right",
            fontsize=8,
            color="tab:red",
            bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1),
        )
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_ylim(bottom=0, top=max(ys) * 1.25 if ys else 1)
    ax.set_xlabel("saved run (oldest first)")
    ax.set_ylabel(f"median time per call ({unit})")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    return save(plt, figure, path)
