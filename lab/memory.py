"""Report section 3c, MXINT8 memory: an encoder's persistent and peak bytes, the saving against
the theoretical 74.2 %, and where the difference goes."""

from __future__ import annotations

from lab import plots
from lab.common import Case, Figures, grouped, of_test, ordered
from perfgate.fields import Fact, Field
from perfgate.format import MISSING, fmt_bytes, fmt_percent, fmt_time
from perfgate.report.tables import render

# 8 bits per value plus one 8-bit scale per group of 32, against 32 bits (MXINT8.md): 74.2 %.
THEORETICAL_SAVING = 1 - (8 + 8 / 32) / 32
BASE_VARIANT = "fp32"
# Extra transient bytes above this share of the FP32 peak are attributed to the bf16 weight.
TRANSIENT_WEIGHT_VISIBLE = 0.005


def _variant(case: Case) -> str:
    return str(case.fact(Fact.VARIANT))


def breakdown(info: dict) -> list[tuple[str, float, bool]]:
    """Waterfall from the theoretical saving to the measured ones: (label, fraction, is_total).

    Persistent: only ``quantizable_linear_share`` of the FP32 bytes can shrink. Peak (CUDA):
    activations and workspaces do not shrink and dilute the saving; the transient bf16 weight
    of the running layer adds bytes. The steps sum exactly to the measured fractions.
    """
    theory = info.get(Fact.THEORETICAL_SAVED, THEORETICAL_SAVING)
    share = info.get(Fact.QUANTIZABLE_SHARE)
    measured = info.get(Fact.PERSISTENT_SAVED)
    if share is None or measured is None:
        return []
    expected = share * theory
    steps = [
        ("theoretical\n(8.25 of 32 bits)", theory, True),
        ("non-Linear parameters\nand classifier\nstay FP32", expected - theory, False),
        ("other persistent\nbytes", measured - expected, False),
        ("persistent saved\n(measured)", measured, True),
    ]
    if all(
        info.get(k) for k in (Fact.FP32_PEAK_BYTES, Field.PEAK_BYTES, Fact.FP32_PERSISTENT_BYTES)
    ):
        fp32_peak, peak = info[Fact.FP32_PEAK_BYTES], info[Field.PEAK_BYTES]
        diluted = (info[Fact.FP32_PERSISTENT_BYTES] - info[Fact.PERSISTENT_BYTES]) / fp32_peak
        peak_saved = 1 - peak / fp32_peak
        steps += [
            ("activations and\nworkspaces, unchanged,\ndilute it", diluted - measured, False),
            ("MXINT8's extra\ntransient bytes\nat its peak", peak_saved - diluted, False),
            ("peak saved\n(measured)", peak_saved, True),
        ]
    return steps


def _explain(info: dict) -> list[str]:
    theory = info.get(Fact.THEORETICAL_SAVED, THEORETICAL_SAVING)
    share, measured = info[Fact.QUANTIZABLE_SHARE], info[Fact.PERSISTENT_SAVED]
    lines = [
        f"- Only {fmt_percent(share)} of the FP32 parameter bytes sit in the Linear layers that "
        "are quantized; embeddings, layer norms and the classifier head stay FP32. At most "
        f"{fmt_percent(share)} x {fmt_percent(theory)} = {fmt_percent(share * theory)} can be "
        f"saved persistently; measured: {fmt_percent(measured)} (difference "
        f"{(measured - share * theory) * 100:+.2f} pt)."
    ]
    if info.get(Fact.FP32_PEAK_BYTES) and info.get(Field.PEAK_BYTES):
        fp32_extra = info[Fact.FP32_PEAK_BYTES] - info[Fact.FP32_PERSISTENT_BYTES]
        extra = info[Field.PEAK_BYTES] - info[Fact.PERSISTENT_BYTES]
        peak_saved = 1 - info[Field.PEAK_BYTES] / info[Fact.FP32_PEAK_BYTES]
        more = extra - fp32_extra
        why = (
            "the dequantized bf16 copy of the running layer's weight, alive only during that "
            "layer's forward"
            if more > TRANSIENT_WEIGHT_VISIBLE * info[Fact.FP32_PEAK_BYTES]
            else "next to these activations the transient bf16 weight barely shows at the peak"
        )
        lines.append(
            f"- At the peak FP32 holds {fmt_bytes(fp32_extra)} beyond its parameters "
            "(activations, attention scores, workspaces). Quantizing weights does not shrink "
            "them, so they dilute the saving. MXINT8's transient bytes at its peak are "
            f"{fmt_bytes(extra)}, {fmt_bytes(more)} more than FP32's: {why}. Peak saved: "
            f"{fmt_percent(peak_saved)}."
        )
    return lines


def _config(case: Case) -> tuple:
    info = case.info
    return case.where, info.get(Fact.ENCODER), info.get(Fact.BATCH), info.get(Fact.SEQUENCE)


def _row(variant: str, case: Case) -> list[str]:
    info, peak = case.info, case.fact(Field.PEAK_BYTES)
    error = info.get(Fact.RELATIVE_ERROR)
    return [
        variant,
        fmt_time(case.median),
        fmt_bytes(info.get(Fact.PERSISTENT_BYTES)),
        fmt_percent(info.get(Fact.PERSISTENT_SAVED)),
        fmt_bytes(peak) if peak else "not measured",
        fmt_percent(info.get(Fact.PEAK_SAVED)) if peak else MISSING,
        MISSING if error is None else f"{error:.2e}",
    ]


def section(cases: list[Case], figures: Figures) -> list[str]:
    encoder = of_test(cases, "test_encoder")
    if not encoder:
        return []
    lines = [
        "### 3c. Encoder memory: why the saving is not 74.2 %",
        "",
        f"A BERT-style encoder classifier with FP32, bf16 or MXINT8 weights (every Linear except "
        f"the classifier quantized, group 32). Theoretical MXINT8 saving: "
        f"{fmt_percent(THEORETICAL_SAVING)} (8.25 bits per weight instead of 32). Persistent: "
        "parameters and buffers; peak: the CUDA allocator's peak while moving the model to the "
        "device and running one forward. Latency: median wall time per forward.",
        "",
    ]
    panels = []
    for (where, name, batch, sequence), members in grouped(encoder, _config).items():
        title = f"{where}, {name}, batch {batch}, sequence {sequence}"
        by_variant = {_variant(c): c for c in members}
        rows = [_row(v, by_variant[v]) for v in ordered(by_variant, first=[BASE_VARIANT])]
        headers = ["weights", "latency", "persistent", "saved", "peak", "peak saved"]
        headers.append("logits rel. error vs FP32")
        lines += [f"**{title}**", "", render(headers, rows, markdown=True), ""]
        for variant, case in by_variant.items():
            if variant.startswith("mxint8") and (steps := breakdown(case.info)):
                lines += _explain(case.info) + [""]
                panels.append((f"{title}: {variant}", steps))
    if panels:
        lines += figures.draw(
            "encoder_memory.png",
            "where the MXINT8 memory saving goes",
            plots.waterfall_plot,
            panels,
        )
    return lines


def headline(cases: list[Case]) -> list[str]:
    """Per MXINT8 encoder case: persistent and peak saving against the theoretical one."""
    lines = []
    for (where, name, batch, sequence), members in grouped(
        of_test(cases, "test_encoder"), _config
    ).items():
        for case in members:
            info = case.info
            if not _variant(case).startswith("mxint8") or Fact.QUANTIZABLE_SHARE not in info:
                continue
            theory = info.get(Fact.THEORETICAL_SAVED, THEORETICAL_SAVING)
            share = info[Fact.QUANTIZABLE_SHARE]
            text = (
                f"- **MXINT8 memory, {where}, {name} batch {batch} sequence {sequence}:** "
                f"{fmt_percent(info[Fact.PERSISTENT_SAVED])} of the persistent bytes saved "
                f"(theory {fmt_percent(theory)}; only {fmt_percent(share)} of the bytes are in "
                f"quantized Linears, so at most {fmt_percent(share * theory)})"
            )
            if info.get(Fact.PEAK_SAVED) is not None:
                text += f", {fmt_percent(info[Fact.PEAK_SAVED])} of the peak"
            lines.append(text + ".")
    return lines
