"""A night's exit status (``perfgate nightly``, ``perfgate check``, the shards' fan-in), with one
line on stderr saying why wherever it is not a plain pass: the regressions by name, undecided
cases by the night's policy, an A/B that stopped, a night that decided nothing."""

from __future__ import annotations

from pathlib import Path

from perfgate.ab.compare import INTERRUPTED
from perfgate.verdict import nightly as policy
from perfgate.verdict.outcome import Verdict

PASSED, FAILED, GATED_NOTHING, INCOMPLETE, INTERRUPTED_STATUS = 0, 1, 6, 75, 130


def verdict_status(night: policy.Night, gate: Path, err, command: str = "nightly") -> int:
    """The night's exit status, with one line on stderr saying why where it is not a plain pass:
    the regressions by name, undecided cases by the policy, a stop, a night that decided
    nothing. ``command``: what the user ran (nightly or check), named in each line."""
    said_by = f"perfgate {command}"
    regressions = [n for n in night.rows if n.verdict is Verdict.REGRESSION]
    if regressions:
        named = "; ".join(f"{n.name} ({n.ab or n.stored})" for n in regressions[:3])
        more = f" and {len(regressions) - 3} more" if len(regressions) > 3 else ""
        print(f"{said_by}: {len(regressions)} regression(s): {named}{more}; see nightly.md",
              file=err)  # fmt: skip
    if night.failing_tests or regressions:
        return FAILED
    undecided = policy.undecided_rows(night.rows)
    names = ", ".join(n.name for n in undecided[:3]) + (", ..." if len(undecided) > 3 else "")
    if undecided and night.undecided == "fail":
        print(f"{said_by}: {len(undecided)} case(s) undecided ({names}): the data "
              "neither show a change nor rule one out, and --undecided fail fails the night; "
              "run more block pairs (--more-blocks) or on a quieter machine",
              file=err)  # fmt: skip
        return FAILED
    if night.stopped == INTERRUPTED or night.remaining:
        said = (
            f"stopped ({night.stopped}) with {len(night.remaining)} cases undecided; what "
            f"it decided is written; {said_by} --resume continues it"
            if night.remaining
            else "was interrupted once it had decided every case; what it decided is written"
        )
        print(f"{said_by}: the A/B {said}", file=err)
        return INTERRUPTED_STATUS if night.stopped == INTERRUPTED else INCOMPLETE
    if policy.gated_nothing(night.rows):
        why = (f"{len(undecided)} undecided ({names}): the data neither show a change nor rule "
               "one out; run it again where the machine is quieter, or with more block pairs"
               if undecided else "check the stored comparison's selection and its "
               "baseline")  # fmt: skip
        print(f"{said_by}: no case was decided ({len(night.rows)} in {gate}), so the "
              f"night cannot pass: {why}", file=err)  # fmt: skip
        return GATED_NOTHING
    if undecided:
        print(f"{said_by}: warning: {len(undecided)} case(s) undecided ({names}), listed "
              "first in nightly.md; the night passes (--undecided fail would fail it)",
              file=err)  # fmt: skip
    return PASSED
