"""Report section 1, torch.compile: ResNet-18 eager vs compiled, steady state and cold start."""

from __future__ import annotations

from lab import plots
from lab.common import Case, Figures, grouped, of_test, ordered
from perfgate.fields import Fact
from perfgate.format import MISSING, fmt_iqr, fmt_ratio, fmt_time
from perfgate.report.tables import render

BASE_MODE = "eager"


def _mode(case: Case) -> str:
    return str(case.fact(Fact.MODE) or case.params.get("mode"))


def _time_with_spread(case: Case | None) -> str:
    if case is None:
        return MISSING
    quartiles = case.benchmark.quartiles
    iqr = f" (IQR {fmt_iqr(quartiles)})" if quartiles is not None else ""
    return fmt_time(case.median) + iqr


def steady_table(cases: list[Case]) -> list[str]:
    """Device x batch rows: each mode's median per call and its speedup over eager."""
    modes = ordered((_mode(c) for c in cases), first=[BASE_MODE, "compiled"])
    others = [m for m in modes if m != BASE_MODE]
    headers = ["machine (device)", "batch", *modes]
    headers += [f"speedup ({BASE_MODE} / {m})" for m in others] + ["host-bound"]
    rows = []
    groups = grouped(cases, lambda c: (c.where, c.fact(Fact.BATCH)))
    for (where, batch), members in groups.items():
        by_mode = {_mode(c): c for c in members}
        base = by_mode.get(BASE_MODE)
        speedups = [
            fmt_ratio(base.median / by_mode[m].median) if base and m in by_mode else MISSING
            for m in others
        ]
        host = ", ".join(m for m, c in by_mode.items() if c.benchmark.host_bound) or "no"
        times = [_time_with_spread(by_mode.get(m)) for m in modes]
        rows.append([where, batch, *times, *speedups, host])
    return [
        "### Steady state (compilation done in warm-up)",
        "",
        "Median wall time per call, synchronized, compile excluded. *Host-bound* marks a case "
        "whose host cannot enqueue work faster than the GPU runs it; its time follows host "
        "jitter.",
        "",
        render(headers, rows, markdown=True),
        "",
    ]


def _curve(case: Case | None) -> dict[int, float]:
    points = (case.fact(Fact.MEAN_PER_CALL_S) or {}) if case else {}
    return {int(n): float(s) for n, s in sorted(points.items(), key=lambda p: int(p[0]))}


def _crossover(eager: dict[int, float], compiled: dict[int, float]) -> str:
    common = [n for n in compiled if n in eager]
    below = [n for n in common if compiled[n] <= eager[n]]
    if not common:
        return "no checkpoint was measured in both modes"
    if not below:
        return f"not reached within the {max(common):,} calls measured"
    return f"measured: compiled's mean per call is below eager's from n = {min(below):,}"


def _answer(where: str, batch, eager: dict, compiled: dict, facts: dict) -> str:
    parts = [f"**{where}, batch {batch}.**"]
    first = facts.get(Fact.FIRST_CALL_S)
    if 5 in compiled and 5 in eager:
        parts.append(
            f"Averaged over the lab's n = 5 calls, compiled costs {fmt_time(compiled[5])} per "
            f"call against eager's {fmt_time(eager[5])} ({fmt_ratio(compiled[5] / eager[5])} "
            f"slower): the first call takes {fmt_time(first)}, of which "
            f"{fmt_time(facts.get(Fact.COMPILE_S))} is compilation (Dynamo capture, Inductor code "
            "generation, kernel builds), and five calls cannot amortize it."
        )
    steady, eager_steady = facts.get(Fact.COMPILED_STEADY_S), facts.get(Fact.EAGER_STEADY_S)
    if steady and eager_steady:
        parts.append(
            f"Once compiled, a call takes {fmt_time(steady)} vs {fmt_time(eager_steady)} eager "
            f"({fmt_ratio(eager_steady / steady)} speedup)"
        )
        even = facts.get(Fact.BREAK_EVEN_CALLS)
        parts[-1] += (
            f", so compilation pays for itself after about {even:,.0f} calls "
            f"(compile time / time saved per call); {_crossover(eager, compiled)}."
            if even
            else ", but compiled is not faster here, so compilation never pays for itself."
        )
    return " ".join(parts)


def cold_start(cases: list[Case], figures: Figures) -> list[str]:
    """Mean time per call after n calls from a cold start, the compile cost and break-even."""
    lines = [
        "### From a cold start: mean time per call over n calls, compile included",
        "",
        "Each round resets Dynamo and empties the Inductor and Triton caches, then makes n "
        "calls; the figure after n calls is the time since the start divided by n (the lab's "
        "measurement).",
        "",
    ]
    panels, answers = [], []
    groups = grouped(cases, lambda c: (c.where, c.fact(Fact.BATCH)))
    for (where, batch), members in groups.items():
        by_mode = {_mode(c): c for c in members}
        eager, compiled = _curve(by_mode.get(BASE_MODE)), _curve(by_mode.get("compiled"))
        facts = by_mode["compiled"].info if "compiled" in by_mode else {}
        rows = [
            [
                f"{n:,}",
                fmt_time(eager.get(n)),
                fmt_time(compiled.get(n)),
                fmt_ratio(eager[n] / compiled[n]) if n in eager and n in compiled else MISSING,
            ]
            for n in sorted(set(eager) | set(compiled))
        ]
        headers = ["n calls", "eager", "compiled", "speedup (eager / compiled)"]
        lines += [f"**{where}, batch {batch}**", "", render(headers, rows, markdown=True), ""]
        answers.append(_answer(where, batch, eager, compiled, facts))
        panels.append(
            dict(
                title=f"ResNet-18 {where}, batch {batch}",
                eager=eager,
                compiled=compiled,
                compile_s=facts.get(Fact.COMPILE_S),
                compiled_steady_s=facts.get(Fact.COMPILED_STEADY_S),
                eager_steady_s=facts.get(Fact.EAGER_STEADY_S),
                break_even=facts.get(Fact.BREAK_EVEN_CALLS),
            )
        )
    lines += figures.draw(
        "compile_cold_start.png",
        "mean time per call vs n, eager vs compiled",
        plots.compile_curve_plot,
        panels,
    )
    return (
        lines
        + ["#### Why did compiled show no speedup, and is it the same on CUDA?", ""]
        + [line for answer in answers for line in (answer, "")]
    )


def section(cases: list[Case], figures: Figures) -> list[str]:
    steady = of_test(cases, "test_resnet18_steady")
    calls = of_test(cases, "test_resnet18_calls")
    if not steady and not calls:
        return []
    lines = ["## 1. torch.compile: ResNet-18, eager vs compiled", ""]
    if steady:
        lines += steady_table(steady)
    lines += cold_start(calls, figures) if calls else ["Cold-start calls: not measured.", ""]
    return lines


def headline(cases: list[Case]) -> list[str]:
    """One line per cold-start group: steady speedups, compile cost, n = 5, break-even."""
    steady = grouped(of_test(cases, "test_resnet18_steady"), lambda c: c.where)
    lines = []
    for (where, batch), members in grouped(
        of_test(cases, "test_resnet18_calls"), lambda c: (c.where, c.fact(Fact.BATCH))
    ).items():
        by_mode = {_mode(c): c for c in members}
        if "compiled" not in by_mode or BASE_MODE not in by_mode:
            continue
        facts = by_mode["compiled"].info
        eager, compiled = _curve(by_mode[BASE_MODE]), _curve(by_mode["compiled"])
        speedups = []
        for group in grouped(steady.get(where, []), lambda c: c.fact(Fact.BATCH)).values():
            modes = {_mode(c): c.median for c in group}
            if BASE_MODE in modes and "compiled" in modes:
                speedups.append(modes[BASE_MODE] / modes["compiled"])
        text = f"- **torch.compile, {where}:**"
        if speedups:
            span = f"{fmt_ratio(min(speedups))} to {fmt_ratio(max(speedups))}"
            text += f" steady-state speedup of compiled ResNet-18 over eager {span} (by batch);"
        text += f" a cold start spends {fmt_time(facts.get(Fact.COMPILE_S))} compiling"
        if 5 in eager and 5 in compiled:
            slower = fmt_ratio(compiled[5] / eager[5])
            text += f", so over the lab's n = 5 calls compiled is {slower} slower"
        if even := facts.get(Fact.BREAK_EVEN_CALLS):
            text += f"; it breaks even after about {even:,.0f} calls (batch {batch})"
        lines.append(text + ".")
    return lines
