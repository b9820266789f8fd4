"""Report section 3a-3b, MXINT8 speed: dequantization bandwidth against the copy roofline and
the CuTe kernel, and a Linear layer with dense vs MXINT8 weights."""

from __future__ import annotations

from lab import plots
from lab.common import (
    Case,
    Figures,
    grouped,
    of_test,
    ordered,
    power_of_two,
    shape_text,
)
from perfgate.fields import Fact, Field
from perfgate.format import MISSING, fmt_bytes, fmt_percent, fmt_rate, fmt_ratio, fmt_time, slug
from perfgate.report.tables import render

# mase-cuda's CuTe dequantization kernel on one H100: 0.64 TB/s effective at 2^25 elements,
# group 32 or 128 (MXINT8.md). A figure from the specification, comparable on H100s only.
CUTE_H100_GBPS = 640.0
CUTE_ELEMENTS = 2**25
DEQUANT_ORDER = ["triton", "reference_compiled", "reference"]
LINEAR_BASE = "dense"


def rate_unit(cases: list[Case]) -> str:
    """TB/s where some figure passes 1 TB/s, else GB/s."""
    top = max((c.fact(Field.GBPS) or 0.0 for c in cases), default=0.0)
    return "TB/s" if top >= 1000 else "GB/s"


def _cute_applies(case: Case) -> bool:
    return case.device == "cuda" and "H100" in case.run.hardware_key


def _dequant_table(members: list[Case], unit: str) -> tuple[list[str], dict]:
    impls = ordered((str(c.fact(Fact.IMPLEMENTATION)) for c in members), first=DEQUANT_ORDER)
    cells = {(c.fact(Fact.ELEMENTS), str(c.fact(Fact.IMPLEMENTATION))): c for c in members}
    sizes = sorted({c.fact(Fact.ELEMENTS) for c in members})
    copy = {c.fact(Fact.ELEMENTS): c.fact(Fact.COPY_GBPS) for c in members}
    moved = {c.fact(Fact.ELEMENTS): c.fact(Fact.MIN_BYTES) for c in members}
    rows = []
    for size in sizes:
        row = [power_of_two(size), fmt_bytes(moved[size]), fmt_rate(copy[size], unit)]
        for impl in impls:
            case = cells.get((size, impl))
            gbps = case.fact(Field.GBPS) if case else None
            fraction = case.fact(Fact.FRACTION_OF_COPY) if case else None
            row.append(
                MISSING if gbps is None else f"{fmt_rate(gbps, unit)} ({fmt_percent(fraction)})"
            )
        rows.append(row)
    headers = ["elements", "bytes moved", "copy roofline", *(f"{i} (% of copy)" for i in impls)]
    panel = dict(
        sizes=sizes,
        copy=[copy[s] for s in sizes],
        series={
            i: [cells[(s, i)].fact(Field.GBPS) if (s, i) in cells else None for s in sizes]
            for i in impls
        },
    )
    return [render(headers, rows, markdown=True), ""], panel


def _dequant_findings(members: list[Case], unit: str) -> list[str]:
    lines = []
    largest = max(c.fact(Fact.ELEMENTS, 0) for c in members)
    groups = {c.fact(Fact.GROUP_SIZE) for c in members}
    group = 32 if 32 in groups else min(groups)
    at_largest = {
        str(c.fact(Fact.IMPLEMENTATION)): c
        for c in members
        if (c.fact(Fact.ELEMENTS), c.fact(Fact.GROUP_SIZE)) == (largest, group)
    }
    for impl in ordered(at_largest, first=DEQUANT_ORDER):
        case = at_largest[impl]
        fraction = case.fact(Fact.FRACTION_OF_COPY)
        if fraction is not None:
            rate = fmt_rate(case.fact(Field.GBPS), unit)
            lines.append(
                f"- {power_of_two(largest)} elements, group {group}: {impl} at "
                f"{fmt_percent(fraction)} of the copy roofline ({rate})"
            )
    kernel = at_largest.get("triton")
    if kernel is not None and "reference_compiled" in at_largest:
        ratio = at_largest["reference_compiled"].median / kernel.median
        lines.append(
            f"- the Triton kernel is {fmt_ratio(ratio)} faster than the PyTorch reference under "
            "torch.compile at that size"
        )
    triton = [c for c in members if c.fact(Fact.IMPLEMENTATION) == "triton" and c.fact(Field.GBPS)]
    if triton and _cute_applies(triton[0]):
        near = min(
            triton,
            key=lambda c: (
                abs(c.fact(Fact.ELEMENTS).bit_length() - CUTE_ELEMENTS.bit_length()),
                c.fact(Fact.GROUP_SIZE) != 32,
            ),
        )
        lines.append(
            f"- CuTe kernel of mase-cuda on an H100: {fmt_rate(CUTE_H100_GBPS, unit)} at "
            f"{power_of_two(CUTE_ELEMENTS)} elements (MXINT8.md); the Triton kernel here moves "
            f"{fmt_rate(near.fact(Field.GBPS), unit)} at {power_of_two(near.fact(Fact.ELEMENTS))}, "
            f"{fmt_ratio(near.fact(Field.GBPS) / CUTE_H100_GBPS)} the CuTe figure"
        )
    if any((c.fact(Fact.FRACTION_OF_COPY) or 0) > 1.05 for c in members):
        lines.append(
            "- fractions above 100 % appear where a call moves only a few MB (both are timed as "
            "replayed CUDA graphs over rotating buffers): two thirds of the kernel's traffic are "
            "writes, which L2 absorbs at that size, against half of a copy's; read the large "
            "sizes against the roofline"
        )
    return lines + [""]


def dequant_section(cases: list[Case], figures: Figures) -> list[str]:
    dequant = of_test(cases, "test_dequantize")
    if not dequant:
        return []
    lines = [
        "### 3a. Dequantization bandwidth against the copy roofline",
        "",
        "Effective bandwidth counts the minimum traffic (1 byte read and 2 written per element, "
        "1 byte per group); the roofline is a device-to-device copy of the same number of bytes "
        "measured in the same run. In brackets: the fraction of that roofline reached.",
        "",
    ]
    for where, members in grouped(dequant, lambda c: c.where).items():
        unit = rate_unit(members)
        panels = []
        for group_size, group in grouped(members, lambda c: c.fact(Fact.GROUP_SIZE)).items():
            table, panel = _dequant_table(group, unit)
            lines += [f"**{where}, group size {group_size}**", "", *table]
            if _cute_applies(group[0]):
                label = (
                    f"CuTe kernel on H100: {fmt_rate(CUTE_H100_GBPS, 'TB/s')} at 2^25 (MXINT8.md)"
                )
                panel["reference"] = (label, CUTE_H100_GBPS)
            panels.append(dict(panel, title=f"group size {group_size}"))
        lines += _dequant_findings(members, unit)
        lines += figures.draw(
            f"dequant_{slug(where)}.png",
            f"dequantization bandwidth, {where}",
            plots.bandwidth_plot,
            f"MXINT8 dequantization bandwidth, {where}",
            panels,
            unit,
        )
    return lines


def _linear_key(case: Case) -> tuple:
    return shape_text(case.fact(Fact.WEIGHT_SHAPE)), case.fact(Fact.BATCH), case.fact(Fact.DTYPE)


def _linear_tables(members: list[Case], copy_gbps: float | None) -> list[str]:
    impls = ordered((str(c.fact(Fact.IMPLEMENTATION)) for c in members), first=[LINEAR_BASE])
    cells = {(_linear_key(c), str(c.fact(Fact.IMPLEMENTATION))): c for c in members}
    rows = []
    for key in ordered(_linear_key(c) for c in members):
        base = cells.get((key, LINEAR_BASE))
        row = [*key]
        for impl in impls:
            case = cells.get((key, impl))
            row.append(MISSING if case is None else fmt_time(case.median))
            if case is not None and base is not None and impl != LINEAR_BASE:
                row[-1] += f" ({fmt_ratio(case.median / base.median)})"
        rows.append(row)
    labels = [i if i == LINEAR_BASE else f"{i} (time / {LINEAR_BASE})" for i in impls]
    time_table = render(["weight N x K", "batch", "activations", *labels], rows, markdown=True)
    storage_rows = []
    by_storage = grouped(
        members,
        lambda c: (_linear_key(c)[0], c.fact(Fact.IMPLEMENTATION), c.fact(Fact.STORAGE_BYTES)),
    )
    for (shape, impl, stored), group in by_storage.items():
        dtypes = ", ".join(ordered(str(c.fact(Fact.DTYPE)) for c in group))
        peaks = [
            c.fact(Field.FORWARD_PEAK_BYTES) for c in group if c.fact(Field.FORWARD_PEAK_BYTES)
        ]
        peak = f"{fmt_bytes(min(peaks))} - {fmt_bytes(max(peaks))}" if peaks else "not measured"
        floor = fmt_time(stored / (copy_gbps * 1e9)) if stored and copy_gbps else MISSING
        storage_rows.append([shape, f"{impl} ({dtypes})", fmt_bytes(stored), peak, floor])
    storage_headers = [
        "weight N x K",
        "implementation (activations)",
        "stored weight + bias",
        "transient bytes of one forward",
        "read once at copy bandwidth",
    ]
    return [
        time_table,
        "",
        render(storage_headers, storage_rows, markdown=True),
        "",
    ]


def linear_section(cases: list[Case]) -> list[str]:
    linear = of_test(cases, "test_linear")
    if not linear:
        return []
    lines = [
        "### 3b. A Linear layer: dense weights vs MXINT8 weights",
        "",
        "Median time per call (CUDA: device time; CPU: wall time); in brackets the time "
        "relative to the dense layer with the same activations (above 1x: slower). The `mxint8` "
        "layer dequantizes the whole weight to bf16 on every call, then runs F.linear, like the "
        "lab's layer: it saves weight memory, and its time is the dense time plus a "
        "dequantization. "
        "The last column of the second table is the floor for a layer that reads its stored "
        "weight once at the copy bandwidth measured in the same run (the largest copy of "
        "section 3a).",
        "",
    ]
    for where, members in grouped(linear, lambda c: c.where).items():
        same = [c for c in of_test(cases, "test_dequantize") if c.where == where]
        copy = max((c.fact(Fact.COPY_GBPS) or 0.0 for c in same), default=0.0) or None
        lines += [f"**{where}**", "", *_linear_tables(members, copy)]
    return lines


def headline(cases: list[Case]) -> list[str]:
    return dequant_headline(cases) + linear_headline(cases)


def linear_headline(cases: list[Case]) -> list[str]:
    """Per machine and implementation: the range of its time relative to the dense layer."""
    lines = []
    for where, members in grouped(of_test(cases, "test_linear"), lambda c: c.where).items():
        dense = {
            _linear_key(c): c.median for c in members if c.fact(Fact.IMPLEMENTATION) == LINEAR_BASE
        }
        ratios: dict[str, list[float]] = {}
        for case in members:
            if case.fact(Fact.IMPLEMENTATION) != LINEAR_BASE and _linear_key(case) in dense:
                ratio = case.median / dense[_linear_key(case)]
                ratios.setdefault(str(case.fact(Fact.IMPLEMENTATION)), []).append(ratio)
        spans = [f"{impl} {fmt_ratio(min(r))} to {fmt_ratio(max(r))}" for impl, r in ratios.items()]
        if spans:
            lines.append(
                f"- **Linear layer, {where}:** time relative to dense weights (same activations, "
                f"all shapes and batches): {'; '.join(spans)}."
            )
    return lines


def dequant_headline(cases: list[Case]) -> list[str]:
    """Per machine: the Triton kernel at its largest size against copy, compiled and CuTe."""
    lines = []
    for where, members in grouped(of_test(cases, "test_dequantize"), lambda c: c.where).items():
        kernel = [c for c in members if c.fact(Fact.IMPLEMENTATION) == "triton"]
        kernel = [c for c in kernel if c.fact(Fact.FRACTION_OF_COPY) is not None]
        if not kernel:
            continue
        unit = rate_unit(members)
        top = max(kernel, key=lambda c: (c.fact(Fact.ELEMENTS), c.fact(Fact.GROUP_SIZE) == 32))
        size, group = top.fact(Fact.ELEMENTS), top.fact(Fact.GROUP_SIZE)
        text = (
            f"- **MXINT8 dequantization, {where}:** the Triton kernel reaches "
            f"{fmt_percent(top.fact(Fact.FRACTION_OF_COPY))} of the copy roofline at "
            f"{power_of_two(size)} elements, group {group} ({fmt_rate(top.fact(Field.GBPS), unit)})"
        )
        compiled = [
            c
            for c in members
            if c.fact(Fact.IMPLEMENTATION) == "reference_compiled"
            and (c.fact(Fact.ELEMENTS), c.fact(Fact.GROUP_SIZE)) == (size, group)
        ]
        if compiled:
            text += (
                f", {fmt_ratio(compiled[0].median / top.median)} faster than the compiled reference"
            )
        if _cute_applies(top):
            text += (
                f", {fmt_ratio(top.fact(Field.GBPS) / CUTE_H100_GBPS)} the CuTe kernel's 0.64 TB/s"
            )
        lines.append(text + ".")
    return lines
