"""The lab report's PNG plots (matplotlib, Agg backend, through ``perfgate.report.plots``): each
function takes plain numbers (seconds, GB/s, fractions) and the path to write, and returns that
path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perfgate.report.plots import pyplot, save

# One colour per implementation name in every plot, so a backend looks the same on each machine.
COLORS = {
    "flash": "tab:blue",
    "efficient": "tab:orange",
    "cudnn": "tab:green",
    "math": "tab:red",
    "triton": "tab:blue",
    "reference_compiled": "tab:orange",
    "reference": "tab:green",
    "eager": "tab:blue",
    "compiled": "tab:orange",
}
SPARE_COLORS = ("tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:gray")


def color(name: str) -> str:
    """The colour of an implementation: fixed for known names, else a stable spare one."""
    if name in COLORS:
        return COLORS[name]
    return SPARE_COLORS[sum(map(ord, name)) % len(SPARE_COLORS)]


def ratio_axis(axis, values: Sequence[float]) -> None:
    """Log-scale ticks at 1-2-5 steps, written as '0.5x', '1x', '2x', spanning ``values``."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    low, high = min([1.0, *values]), max([1.0, *values])
    steps = [m * 10.0**e for e in range(-3, 4) for m in (1, 2, 5)]
    axis.set_major_locator(FixedLocator([t for t in steps if low / 2 <= t <= high * 2]))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))


def compile_curve_plot(path: Path, panels: Sequence[dict]) -> Path:
    """Mean seconds per call after n calls from a cold start, eager vs compiled, log-log.

    Each panel: title, eager and compiled ({n: seconds}), compile_s, compiled_steady_s,
    eager_steady_s and break_even (calls); missing values are None.
    """
    plt = pyplot()
    figure, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.6), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        for mode, style in (("eager", "o-"), ("compiled", "s-")):
            curve = panel.get(mode) or {}
            ax.plot(
                list(curve),
                list(curve.values()),
                style,
                label=f"{mode}, measured",
                color=color(mode),
            )
        n_max = max([*panel.get("eager", {}), *panel.get("compiled", {}), 1])
        break_even, compile_s = panel.get("break_even"), panel.get("compile_s")
        x_max = max(n_max, break_even or 0) * 2
        steady = panel.get("compiled_steady_s")
        if compile_s is not None and steady is not None:
            ns = [1.0 * 1.25**k for k in range(200) if 1.25**k <= x_max]
            ax.plot(
                ns,
                [compile_s / n + steady for n in ns],
                ":",
                color="black",
                linewidth=1,
                label="compiled, modelled: compile time / n + steady time",
            )
        if panel.get("eager_steady_s"):
            ax.axhline(
                panel["eager_steady_s"],
                color="tab:blue",
                linestyle=":",
                linewidth=1,
                label="eager steady state",
            )
        if break_even:
            ax.axvline(
                break_even,
                color="grey",
                linestyle="--",
                linewidth=1,
                label=f"break-even: {break_even:,.0f} calls",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(0.8, x_max)
        ax.set_xlabel("calls n since a cold start (log scale)")
        ax.set_ylabel("mean time per call, compile included (s, log scale)")
        ax.set_title(panel["title"], fontsize=10)
        ax.grid(which="major", alpha=0.3)
        ax.legend(fontsize=8)
    return save(plt, figure, path)


def speedup_bars(
    path: Path, title: str, groups: Sequence[str], series: dict[str, Sequence[float | None]]
) -> Path:
    """Grouped bars of speedup over a baseline (1x line), one bar per series in each group."""
    plt = pyplot()
    bars = len(groups) * max(len(series), 1)
    figure, ax = plt.subplots(figsize=(min(16.0, max(7.0, 0.32 * bars + 2.5)), 4.8))
    width = 0.8 / max(len(series), 1)
    for k, (name, values) in enumerate(series.items()):
        xs = [i + (k - (len(series) - 1) / 2) * width for i, v in enumerate(values) if v]
        ys = [v for v in values if v]
        drawn = ax.bar(xs, ys, width, label=name, color=color(name))
        ax.bar_label(drawn, labels=[f"{v:.2g}" for v in ys], fontsize=7, padding=1)
    ax.axhline(1.0, color="black", linewidth=1, label="naive (1x)")
    ax.set_yscale("log")
    values = [v for vs in series.values() for v in vs if v]
    ratio_axis(ax.yaxis, values)
    ax.set_ylim(min([1.0, *values]) / 1.6, max([1.0, *values]) * 1.6)
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    ax.set_ylabel("speedup over naive attention (x, log scale)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=len(series) + 1, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    return save(plt, figure, path)


def bandwidth_plot(path: Path, title: str, panels: Sequence[dict], unit: str = "GB/s") -> Path:
    """Bandwidth (given in GB/s, shown in ``unit``) vs element count, log-log, one panel per
    group size. Each panel: title, sizes, copy (GB/s per size), series ({name: [GB/s|None]}),
    and optional reference (label, GB/s) drawn as a horizontal line."""
    plt = pyplot()
    scale = 1000.0 if unit == "TB/s" else 1.0
    figure, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 4.6), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        sizes = panel["sizes"]
        for name, values in panel["series"].items():
            points = [(s, v / scale) for s, v in zip(sizes, values, strict=True) if v]
            ax.plot(*zip(*points, strict=True), "o-", label=name, color=color(name))
        copy = [(s, v / scale) for s, v in zip(sizes, panel["copy"], strict=True) if v]
        if copy:
            ax.plot(*zip(*copy, strict=True), "k--", label="copy roofline (same bytes)")
        if panel.get("reference"):
            label, gbps = panel["reference"]
            ax.axhline(gbps / scale, color="tab:red", linestyle=":", linewidth=1.5, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("elements dequantized (log2 scale)")
        ax.set_ylabel(f"effective bandwidth ({unit}, log scale)")
        ax.set_title(panel["title"], fontsize=10)
        ax.grid(which="major", alpha=0.3)
        ax.legend(fontsize=8)
    figure.suptitle(title, fontsize=11)
    return save(plt, figure, path)


def waterfall_plot(path: Path, panels: Sequence[tuple[str, Sequence[tuple[str, float, bool]]]]):
    """Memory saved (fractions) as waterfalls: each step is (label, value, is_total); a total
    is drawn from 0, a step from the running value."""
    plt = pyplot()
    from matplotlib.patches import Patch

    figure, axes = plt.subplots(len(panels), 1, figsize=(10, 3.6 * len(panels)), squeeze=False)
    for ax, (title, steps) in zip(axes[:, 0], panels, strict=True):
        level = 0.0
        for i, (_label, value, is_total) in enumerate(steps):
            bottom = 0.0 if is_total else level + min(value, 0.0)
            color = "tab:blue" if is_total else ("tab:red" if value < 0 else "tab:green")
            ax.bar(
                i,
                abs(value) * 100 if not is_total else value * 100,
                0.6,
                bottom=bottom * 100,
                color=color,
            )
            level = value if is_total else level + value
            text = f"{value * 100:.1f} %" if is_total else f"{value * 100:+.1f} pt"
            ax.annotate(
                text,
                (i, max(bottom * 100 + abs(value) * 100, level * 100)),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_xticks(range(len(steps)), [s[0] for s in steps], fontsize=8)
        ax.set_ylabel("memory saved vs FP32 (%)")
        ax.set_ylim(0, 100)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    legend = [
        Patch(color="tab:blue", label="saving (%)"),
        Patch(color="tab:red", label="points lost"),
        Patch(color="tab:green", label="points gained"),
    ]
    axes[0, 0].legend(handles=legend, fontsize=8, loc="upper right")
    figure.tight_layout()
    return save(plt, figure, path)
