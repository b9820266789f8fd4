"""Thresholds: what change counts, as fractions of the baseline (0.10 = 10 %), per family or
test, from the command line or a test's marker; and the one parser of a threshold as a user
writes it (``10%`` or ``0.1``; a bare ``10`` is ambiguous and refused)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Real

DEFAULT_TIME_THRESHOLD = 0.10  # slower by more than 10 % of the baseline median
DEFAULT_ALPHA = 0.01  # one-sided Mann-Whitney significance level
DEFAULT_MEMORY_TOLERANCE = 0.01  # peak memory may grow by 1 %: it is not noisy
DEFAULT_RATIO_THRESHOLD = 0.10  # a same-run ratio may lose 10 % of its baseline value
DEFAULT_INSTRUCTIONS_TOLERANCE = 0.01  # instructions per call may grow by 1 %
TIME_UPPER = math.inf  # a time threshold may pass 100 %: 150 % fails a case 2.5 times slower


def check_fraction(value: float, name: str, upper: float = 1.0) -> float:
    """``value`` as a float in [0, upper]; thresholds are fractions (0.10 = 10 %), not percent."""
    if isinstance(value, bool) or not (isinstance(value, Real) and 0.0 <= value <= upper):
        raise ValueError(f"{name} must be a fraction in [0, {upper}] (0.10 = 10 %), got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Thresholds:
    """Time threshold (fraction) per family or test name with a global default; also the
    significance level, the memory tolerance and the default same-run-ratio threshold.

    ``default`` None means none was given: each case then gets a threshold from its measured
    noise (``verdict.noise``), or DEFAULT_TIME_THRESHOLD.

    ``by_name`` keys are lower case: ``--perf-gate-threshold=SDPA=0.2`` and ``sdpa=0.2`` agree.
    """

    default: float | None = None
    by_name: Mapping[str, float] = field(default_factory=dict)
    alpha: float = DEFAULT_ALPHA
    memory_tolerance: float = DEFAULT_MEMORY_TOLERANCE
    ratio: float = DEFAULT_RATIO_THRESHOLD

    def __post_init__(self) -> None:
        fractions = {"alpha": self.alpha, "ratio": self.ratio}
        if self.default is not None:
            fractions["default"] = self.default
        fractions.update({f"threshold of {k!r}": v for k, v in self.by_name.items()})
        for name, value in fractions.items():
            upper = {"ratio": 0.999, "alpha": 1.0}.get(name, TIME_UPPER)
            check_fraction(value, name, upper=upper)
        check_fraction(self.memory_tolerance, "memory_tolerance")

    def unknown_names(self, known: Iterable[str]) -> list[str]:
        """Names given a threshold that match no family or test in ``known`` (any case)."""
        lowered = {name.lower() for name in known}
        return sorted(name for name in self.by_name if name not in lowered)


def parse_fraction(text: str) -> float:
    """A threshold as the gate takes it: ``10%`` or ``0.1`` (a fraction) are 10 %; a bare
    number above 1 (``10``) is ambiguous and refused. ValueError with one line."""
    value = str(text).strip()
    percent = value.endswith("%")
    try:
        number = float(value.removesuffix("%").strip())
    except ValueError:
        raise ValueError(
            f"threshold {text!r}: expected a fraction or a percentage, e.g. 0.1 or 10%"
        ) from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(
            f"threshold {text!r}: expected a fraction or a percentage of 0 or more, e.g. 0.1 or 10%"
        )
    if not percent and number > 1:
        raise ValueError(f"threshold {text!r} is ambiguous: write {value}% or {number / 100:g}")
    return number / 100.0 if percent else number


class Fraction(float):
    """A fraction as a user wrote it: the value (0.1 for ``10%`` or ``0.1``) and ``text``, what
    was written, to pass on to another parser as it was (``150%`` stays ``150%``)."""

    text: str

    def __new__(cls, text: str) -> Fraction:
        fraction = super().__new__(cls, parse_fraction(text))
        fraction.text = str(text).strip()
        return fraction


@dataclass(frozen=True)
class ThresholdSpec:
    """One ``[NAME=]FRACTION`` as a user wrote it: ``name`` (lower case; "" for every case) and
    its ``fraction``; ``str()`` is the text as written."""

    name: str
    fraction: Fraction

    @classmethod
    def parse(cls, text: str) -> ThresholdSpec:
        """ValueError with one line saying what is wrong (``15`` alone is ambiguous)."""
        name, _, value = str(text).rpartition("=")
        try:
            return cls(name.strip().lower(), Fraction(value))
        except ValueError as error:
            raise ValueError(
                f"{error} (as FRACTION or NAME=FRACTION, e.g. 0.15 or sdpa=20%)"
            ) from None

    def __str__(self) -> str:
        return f"{self.name}={self.fraction.text}" if self.name else self.fraction.text


def parse_thresholds(
    specs: Iterable[str | ThresholdSpec], alpha: float = DEFAULT_ALPHA
) -> Thresholds:
    """Thresholds from ``[NAME=]FRACTION`` specs (checked ``ThresholdSpec``, or their text):
    ``0.15`` or ``15%`` for every benchmark, ``sdpa=0.2`` for a family or a test function."""
    default, by_name = None, {}
    for spec in specs:
        checked = spec if isinstance(spec, ThresholdSpec) else ThresholdSpec.parse(spec)
        if checked.name:
            by_name[checked.name] = float(checked.fraction)
        else:
            default = float(checked.fraction)
    return Thresholds(default=default, by_name=by_name, alpha=alpha)


def threshold_for(test: str, family: str | None, marker: float | None, t: Thresholds) -> float:
    """Time threshold (fraction) of one benchmark: its marker's, else one given for its test
    function, else for its family, else the default given (else DEFAULT_TIME_THRESHOLD)."""
    if marker is not None:
        return check_fraction(marker, f"threshold marker of {test}", upper=TIME_UPPER)
    for name in (test, family):
        if name is not None and name.lower() in t.by_name:
            return float(t.by_name[name.lower()])
    return DEFAULT_TIME_THRESHOLD if t.default is None else t.default


def _argument(parse, text: str):
    try:
        return parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def fraction_argument(text: str) -> Fraction:
    """An argparse type for one fraction (``Fraction``); its error is argparse's one line."""
    return _argument(Fraction, text)


def threshold_argument(text: str) -> ThresholdSpec:
    """An argparse type for a ``[NAME=]FRACTION`` (``ThresholdSpec``)."""
    return _argument(ThresholdSpec.parse, text)


def parse_alpha(text: str) -> float:
    """A significance level, above 0 and below 1 (``0.01``); ValueError with one line."""
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not 0 < number < 1:
        raise ValueError(f"{text!r}: a significance level between 0 and 1, e.g. 0.01")
    return number


def alpha_argument(text: str) -> float:
    """An argparse type for a significance level (``parse_alpha``)."""
    return _argument(parse_alpha, text)
