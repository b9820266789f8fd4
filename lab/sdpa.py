"""Report section 2, kernel fusion: the lab's naive attention vs each SDPA backend."""

from __future__ import annotations

import shlex

from lab import plots
from lab.common import Case, Figures, grouped, of_test, ordered, shape_text
from perfgate.fields import Fact
from perfgate.format import MISSING, fmt_ratio, fmt_time, slug
from perfgate.report.tables import render

BASELINE = "naive"
KNOWN_ORDER = [BASELINE, "flash", "efficient", "cudnn", "math"]
DTYPE_ORDER = ["fp32", "bf16", "fp16"]
LAB_CASE = ("32x8x128x64", "fp16")  # the lab's shape (batch, heads, sequence, head dim) and dtype


def _key(case: Case) -> tuple[str, str]:
    return shape_text(case.fact(Fact.SHAPE)), str(case.fact(Fact.DTYPE))


def _table(members: list[Case]) -> tuple[list[str], list[tuple], dict[str, list]]:
    """Markdown lines, (shape, dtype, best impl, best speedup) per row, and plot series."""
    impls = ordered((str(c.fact(Fact.IMPLEMENTATION)) for c in members), first=KNOWN_ORDER)
    fused = [i for i in impls if i != BASELINE]
    cells = {(_key(c), str(c.fact(Fact.IMPLEMENTATION))): c.median for c in members}
    seen = ordered(_key(c) for c in members)
    shapes = ordered(shape for shape, _ in seen)
    dtypes = ordered((dtype for _, dtype in seen), first=DTYPE_ORDER)
    keys = sorted(seen, key=lambda k: (shapes.index(k[0]), dtypes.index(k[1])))
    rows, best, series = [], [], {impl: [] for impl in fused}
    for key in keys:
        naive = cells.get((key, BASELINE))
        speedups = {i: naive / cells[(key, i)] for i in fused if naive and (key, i) in cells}
        row = [*key, fmt_time(naive)]
        for impl in fused:
            time = cells.get((key, impl))
            row.append(MISSING if time is None else fmt_time(time))
            if impl in speedups:
                row[-1] += f" ({fmt_ratio(speedups[impl])})"
            series[impl].append(speedups.get(impl))
        top = max(speedups, key=speedups.get) if speedups else None
        row.append(f"{top} {fmt_ratio(speedups[top])}" if top else MISSING)
        rows.append(row)
        best.append((*key, top, speedups.get(top) if top else None, speedups))
    headers = ["shape (B, H, S, D)", "dtype", BASELINE, *fused, "fastest fused vs naive"]
    return [render(headers, rows, markdown=True), ""], best, series


def _summary(best: list[tuple]) -> list[str]:
    """Per dtype, the range of the fastest fused backend's speedup; then who loses to naive."""
    lines = []
    for dtype, rows in grouped(best, lambda row: row[1]).items():
        measured = [row for row in rows if row[2]]
        if not measured:
            continue
        low, high = min(measured, key=lambda r: r[3]), max(measured, key=lambda r: r[3])
        span = f"{fmt_ratio(low[3])} ({low[0]}, {low[2]})"
        if high is not low:
            span += f" to {fmt_ratio(high[3])} ({high[0]}, {high[2]})"
        slower = " (slower than naive)" if high[3] < 1.0 else ""
        lines.append(f"- {dtype}: the fastest fused backend vs naive: {span}{slower}")
    for impl in sorted({i for *_, speedups in best for i, v in speedups.items() if v < 1.0}):
        cases = [f"{shape} {dtype}" for shape, dtype, *_, s in best if s.get(impl, 1.0) < 1.0]
        total = sum(impl in s for *_, s in best)
        where = "every case" if len(cases) == total else ", ".join(cases)
        lines.append(f"- slower than naive: {impl} in {len(cases)} of {total} ({where})")
    return lines + [""]


def _profile_hint(members: list[Case]) -> list[str]:
    naive = [c for c in members if c.fact(Fact.IMPLEMENTATION) == BASELINE]
    if not naive:
        return []
    case = next((c for c in naive if _key(c) == LAB_CASE), naive[0])
    clock = "self device time" if case.device == "cuda" else "self CPU time"
    return [
        "Where the time goes: `perfgate profile TEST_ID` runs one case under torch.profiler "
        f"and prints the top operators by {clock} (naive: `aten::bmm` and softmax; fused: one "
        "attention kernel), e.g.",
        "",
        f"    perfgate profile {shlex.quote(case.fullname)}",
        "",
    ]


def section(cases: list[Case], figures: Figures) -> list[str]:
    attention = of_test(cases, "test_attention")
    if not attention:
        return []
    lines = [
        "## 2. Kernel fusion: naive attention vs F.scaled_dot_product_attention",
        "",
        "Median device time per call (CUDA: a replayed CUDA graph over rotating inputs; CPU: wall "
        "time); in brackets the speedup over the lab's naive attention (matmul, scale, softmax, "
        "matmul) on the same inputs. '-': the backend does not support that dtype or device. "
        "Every case first checked its output against an fp32 reference.",
        "",
    ]
    for where, members in grouped(attention, lambda c: c.where).items():
        table, best, series = _table(members)
        lines += [f"### {where}", "", *table, *_summary(best)]
        groups = [f"{shape}\n{dtype}" for shape, dtype, *_ in best]
        lines += figures.draw(
            f"sdpa_{slug(where)}.png",
            f"SDPA speedup over naive attention, {where}",
            plots.speedup_bars,
            f"Fused attention backends vs naive attention, {where}",
            groups,
            series,
        )
        lines += _profile_hint(members)
    return lines


def headline(cases: list[Case]) -> list[str]:
    """Per machine: the lab case's best fused speedup, the largest one, and who loses."""
    lines = []
    for where, members in grouped(of_test(cases, "test_attention"), lambda c: c.where).items():
        _, best, _ = _table(members)
        measured = [row for row in best if row[2]]
        if not measured:
            continue
        text = f"- **Fused attention, {where}:**"
        lab = [row for row in measured if row[:2] == LAB_CASE]
        if lab:
            text += f" at the lab's {' '.join(LAB_CASE)} the fastest backend ({lab[0][2]}) is"
            text += f" {fmt_ratio(lab[0][3])} faster than naive attention;"
        top = max(measured, key=lambda row: row[3])
        text += f" the largest gain is {fmt_ratio(top[3])} ({top[0]} {top[1]}, {top[2]})"
        losers = sorted({i for *_, s in best for i, v in s.items() if v < 1.0})
        if losers:
            text += f"; slower than naive somewhere: {', '.join(losers)}"
        lines.append(text + ".")
    return lines
