"""The lab report (docs/report/) regenerated from runs: ``python -m lab [RUN ...] [--out DIR]``,
which is ``tox -e report``. Without RUN, the runs are the newest baselines of ``REPORTED`` as the
gate chooses them (``perfgate.store.baseline``); the report's first line names them.
tests/test_docs.py fails while the committed report names a run older than the newest of its
hardware.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from lab import answers, write_report
from perfgate import format as fmt
from perfgate import store
from perfgate.outputs import BadOutput, check_folder
from perfgate.report.plots import PlotsUnavailable
from perfgate.store.baseline import choose, key_folder

ROOT = Path(__file__).resolve().parent.parent
BASELINES = ROOT / "baselines"
REPORTED = ("NVIDIA-H100-80GB-HBM3", "AMD-EPYC-2cores")  # the GPU first, as the report's tables


class LabError(Exception):
    """What the lab report cannot do, said in one line."""


def newest_runs(baselines: Path = BASELINES, keys: tuple[str, ...] = REPORTED) -> list[Path]:
    """The newest run of each hardware key (the gate's baseline choice), relative to the
    repository root when it lies inside it."""
    paths = []
    for key in keys:
        run, _ = choose(None, key_folder(baselines, key))
        path = run.path.resolve()
        paths.append(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return paths


def report(args: argparse.Namespace, out, err) -> int:
    check_folder(args.out, "--out")
    print("reading runs...", file=err, flush=True)
    paths = args.runs or newest_runs()
    runs = [store.load(Path(path)) for path in paths]
    if not answers(runs):
        raise LabError(
            "the lab report answers this repository's lab questions (its torch.compile, SDPA and "
            f"MXINT8 cases), and {runs[0].path} has none of them; for any project's runs use "
            "perfgate compare or perfgate history"
        )
    command = ["python", "-m", "lab", *map(str, paths), "--out", str(args.out)]
    command += ["--no-plots"] if args.no_plots else []
    path, pngs = write_report(runs, args.out, not args.no_plots, err, shlex.join(command))
    print(f"wrote {path} and {len(pngs)} plots", file=out)
    return 0


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    """Run the command line ``argv``; the exit status: 0, or 2 with one line on stderr."""
    out, err = out or sys.stdout, err or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__.split("\n\n")[0])
    newest = "default: the newest baseline of each hardware in REPORTED"
    parser.add_argument("runs", nargs="*", metavar="RUN", help=f"run files ({newest})")
    where = "folder for report.md and its PNGs (default: docs/report)"
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report", help=where)
    parser.add_argument("--no-plots", action="store_true", help="markdown only, no matplotlib")
    args = parser.parse_args(argv)
    here = Path.cwd()
    os.chdir(ROOT)  # the report's first line names the runs as paths from the repository root
    args.runs = [_from_root(here / run) for run in args.runs]
    args.out = _from_root(here / args.out)
    try:
        return report(args, out, err)
    except (LabError, store.StoreError, PlotsUnavailable, BadOutput) as error:
        print(f"lab report: error: {fmt.terminal(error)}", file=err)
        return 2
    finally:
        os.chdir(here)


def _from_root(path: Path) -> Path:
    """``path`` relative to the repository root where it lies inside it, else absolute."""
    path = path.resolve()
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


if __name__ == "__main__":
    sys.exit(main())
