"""False alarms and misses of the gate on a shared, loaded CPU runner, simulated: sessions of
``--cases`` timed cases whose machine is sometimes busy (every case slower by a load factor that
each case feels to its own degree, with noisier rounds), a baseline session and a current one, the
gate's confirmation re-run in the same (still loaded) session, judged by perfgate's own judge
with and without the machine-shift rule (``perfgate.verdict.shift``).

    python docs/gate-validation/scripts/shift_simulation.py --sessions 400 --cases 12

Prints, per scenario, the share of sessions with a confirmed regression on unchanged code (false
alarm), and the share in which one case slowed by a factor was caught, naming it alone.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from perfgate.benchmark import Benchmark, Run
from perfgate.verdict import shift
from perfgate.verdict.judge import judge
from perfgate.verdict.outcome import Verdict


def session_load(rng: np.random.Generator, busy: float) -> float:
    """The machine's slowdown in one session: 1 when quiet, 1.1-2.5 when busy."""
    return float(rng.uniform(1.1, 2.5)) if rng.random() < busy else 1.0


SCATTER = 0.02  # under load, each case also moves by its own lognormal factor per session
SLOW_SHARE = 0.9  # and runs up to this share of its rounds (its own share each session) slowly
SLOW_ROUND = (1.6, 1.9)  # that much slower (another job on the other thread of its core)


def case_rounds(rng, median: float, cv: float, load: float, feel: float, n: int) -> list[float]:
    """``n`` rounds of one case: lognormal noise ``cv`` (doubled under load), slowed by the
    load as this case feels it (``feel``: 0.5-1.5 of the machine's slowdown), and under load as
    the cases of a real project on a busy 2-core runner were (docs/gate-validation/
    cpu-shared-runner/, session 12): a share of its rounds, its own each session, up to
    SLOW_SHARE, runs SLOW_ROUND times slower, and the whole case moves by a small factor of its
    own (lognormal, SCATTER): its median moves by up to +90 %, its fastest rounds by a few %."""
    slowed = 1.0 + (load - 1.0) * feel
    if load > 1.0:
        slowed *= rng.lognormal(0.0, SCATTER)
    noise = cv * (2.0 if load > 1.0 else 1.0)
    sigma = math.sqrt(math.log1p(noise**2))
    rounds = median * slowed * rng.lognormal(0.0, sigma, n)
    if load > 1.0:
        rounds[rng.random(n) < rng.uniform(0.0, SLOW_SHARE)] *= rng.uniform(*SLOW_ROUND)
    return list(rounds)


def run_of(rounds: dict[str, list[float]]) -> Run:
    benchmarks = {name: Benchmark(name, name, samples=tuple(r)) for name, r in rounds.items()}
    return Run(None, "", {}, {}, benchmarks)


def one_session(rng, cases: int, busy: float, slowed: float, use_shift: bool) -> set[str]:
    """The confirmed regressions of one gated session (case 0 is ``slowed`` times slower)."""
    medians = rng.uniform(1e-6, 1e-3, cases)
    cvs = rng.uniform(0.02, 0.10, cases)
    feels = rng.uniform(0.5, 1.5, cases)
    names = [f"t.py::test_{i}" for i in range(cases)]
    n = 50

    def draw(load: float, factor0: float) -> dict[str, list[float]]:
        return {
            name: case_rounds(rng, medians[i] * (factor0 if i == 0 else 1.0), cvs[i], load,
                              feels[i], n)
            for i, name in enumerate(names)
        }  # fmt: skip

    baseline = run_of(draw(session_load(rng, busy), 1.0))
    load = session_load(rng, busy)
    current = run_of(draw(load, slowed))
    detect = shift.detect
    if not use_shift:
        shift.detect = lambda results: None
    try:
        first = judge([baseline], current)
        flagged = {r.name for r in first if r.verdict is Verdict.UNCONFIRMED}
        if not flagged:
            return set()
        again = {name: rounds for name, rounds in draw(load, slowed).items() if name in flagged}
        final = judge([baseline], current, confirmation=run_of(again))
    finally:
        shift.detect = detect
    return {r.name for r in final if r.verdict is Verdict.REGRESSION}


def rates(sessions: int, cases: int, busy: float, slowed: float, use_shift: bool, seed: int):
    rng = np.random.default_rng(seed)
    alarms = caught = 0
    for _ in range(sessions):
        found = one_session(rng, cases, busy, slowed, use_shift)
        if slowed == 1.0:
            alarms += bool(found)
        else:
            caught += found == {"t.py::test_0"}
            alarms += bool(found - {"t.py::test_0"})
    return alarms / sessions, caught / sessions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--cases", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("| busy sessions | case 0 slowed | rule | false alarm (other cases) | caught alone |")
    print("| --- | --- | --- | --- | --- |")
    for busy in (0.0, 0.5, 1.0):
        for slowed in (1.0, 1.3, 2.0, 4.0):
            for use_shift in (False, True):
                alarm, caught = rates(args.sessions, args.cases, busy, slowed, use_shift,
                                      args.seed)  # fmt: skip
                rule = "with shift" if use_shift else "without"
                found = "-" if slowed == 1.0 else f"{caught:.1%}"
                print(f"| {busy:.0%} | x{slowed:g} | {rule} | {alarm:.1%} | {found} |", flush=True)


if __name__ == "__main__":
    main()
