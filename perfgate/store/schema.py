"""The fields perfgate reads from a run beyond pytest-benchmark's own, checked once when the
store loads a run, so that a badly typed field is one line naming the file and the field before
anything runs, never a traceback after the matrix ran.

``benchmark.run_from_json`` checks the shape pytest-benchmark needs (names, stats, per-round
data); this module checks perfgate's additions (``machine_info.perfgate``, each benchmark's
``extra_info.perfgate`` declarations and gate inputs) and the run's datetime.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from perfgate.benchmark import Benchmark, Field, Run, RunFormatError
from perfgate.fields import Declared, RunField, shard_problem
from perfgate.format import slug

# pytest-benchmark's comparison table reads these stats of a compared run (its default columns)
TABLE_STATS = ("min", "max", "mean", "stddev", "median", "iqr", "ops", "rounds", "iterations")
FUTURE_SLACK = timedelta(minutes=10)  # clocks of two machines may disagree by this much
OLDEST = datetime.min.replace(tzinfo=timezone.utc)


def recorded_at(run: Run) -> datetime:
    """The run's datetime, aware (a naive one is UTC, as pytest-benchmark writes it); the
    oldest possible when the run has none."""
    if not run.datetime:
        return OLDEST
    try:
        return aware(run.datetime)
    except ValueError as error:
        raise RunFormatError(
            f"{run.label if run.path is None else run.path}: datetime {run.datetime!r} is not an "
            "ISO 8601 date and time"
        ) from error


def aware(text: str) -> datetime:
    """An ISO 8601 date and time as an aware datetime (naive: UTC); ValueError when it is not."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def from_the_future(run: Run) -> bool:
    """Recorded after now (beyond a clock skew of FUTURE_SLACK): never a baseline."""
    return recorded_at(run) > datetime.now(timezone.utc) + FUTURE_SLACK


def check(run: Run) -> None:
    """RunFormatError naming the file and the field of the first badly typed field."""
    where = str(run.path) if run.path else "this run"
    recorded_at(run)
    _object(run.machine_info.get(RunField.PERFGATE), f"{where}: machine_info.perfgate")
    for name in (RunField.SOFTWARE, RunField.GPU_HEALTH):
        _object(run.perfgate.get(name), f"{where}: machine_info.perfgate.{name}")
    key = run.perfgate.get(RunField.HARDWARE_KEY)
    if key not in (None, "") and (problem := folder_name_problem(key)):  # "": not recorded
        raise RunFormatError(f"{where}: machine_info.perfgate.hardware_key {problem}")
    shard = run.perfgate.get(RunField.SHARD)
    if shard is not None and (problem := _shard_problem(shard)):
        raise RunFormatError(f"{where}: machine_info.perfgate.shard {problem}")
    reasons = run.gpu_health.get("untrusted_reasons")
    if reasons is not None and not (isinstance(reasons, list) and all(map(_text, reasons))):
        raise RunFormatError(
            f"{where}: machine_info.perfgate.gpu_health.untrusted_reasons must be a list of strings"
        )
    commit = run.commit_info.get("id")
    if commit is not None and not isinstance(commit, str):
        raise RunFormatError(f"{where}: commit_info.id must be a string (a commit hash)")
    for benchmark in run.benchmarks.values():
        _check_benchmark(benchmark, f"{where}: {benchmark.fullname}: extra_info")


def folder_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be one folder of the store (a hardware key, a machine id): it must be
    a name as perfgate makes them (``format.slug``: letters, digits, '.', '_' and '-', not
    starting with '.'), so that a run saved or a page written under it stays in the folder
    chosen, and the name is plain text wherever it is shown; None when it can."""
    if not isinstance(name, str):
        return "must be a string"
    if name != slug(name):
        return (
            f"{name!r} cannot be a folder name (letters, digits, '.', '_' and '-' only, not "
            "starting with '.')"
        )
    return None


def _shard_problem(shard: object) -> str | None:
    if not isinstance(shard, dict):
        return 'must be an object {"index": I, "count": N}'
    problem = shard_problem(shard.get("index"), shard.get("count"))
    label = f"{shard.get('index')!r}/{shard.get('count')!r}"
    return f"{label} names no part ({problem})" if problem else None


def _text(value: object) -> bool:
    return isinstance(value, str)


def _check_benchmark(benchmark: Benchmark, where: str) -> None:
    declared = benchmark.extra_info.get(Field.DECLARATIONS)
    _object(declared, f"{where}.perfgate")
    declared = declared or {}
    family = declared.get(Declared.FAMILY)
    if family is not None and not isinstance(family, str):
        raise RunFormatError(f"{where}.perfgate.family must be a string")
    threshold = declared.get(Declared.THRESHOLD)
    if threshold is not None and not _number(threshold, above=0):
        raise RunFormatError(f"{where}.perfgate.threshold must be a positive number")
    ratios = declared.get(Declared.RATIOS) or []
    if not isinstance(ratios, list) or not all(_ratio(r) for r in ratios):
        raise RunFormatError(f"{where}.perfgate.ratios must be a list of perfgate.Ratio objects")
    reduced = benchmark.extra_info.get(Field.REDUCED_CLOCK_ROUNDS)
    if reduced is not None and not (_number(reduced, above=-1) and float(reduced).is_integer()):
        raise RunFormatError(f"{where}.reduced_clock_rounds must be a count of rounds")


def check_table_stats(run: Run, entries: list) -> None:
    """RunFormatError unless every entry has the stats pytest-benchmark's table shows."""
    for index, entry in enumerate(entries):
        stats = entry.get("stats") or {}
        missing = [name for name in TABLE_STATS if not _number(stats.get(name), above=None)]
        if missing:
            raise RunFormatError(
                f"{run.path}: benchmarks[{index}] ({entry.get('fullname')}): stats.{missing[0]} "
                "is missing or not a number (pytest-benchmark shows it); record the run again "
                "with --benchmark-save"
            )


def _object(value: object, where: str) -> None:
    if value is not None and not isinstance(value, dict):
        raise RunFormatError(f"{where} must be an object, not {type(value).__name__}")


def _ratio(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("name"), str)


def _number(value: object, above: float | None) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return above is None or value > above
