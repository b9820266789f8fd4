"""The lab report (docs/report/) regenerated from the newest run of each hardware it reports:
``python tools/lab_report.py [--out docs/report]``, which is ``tox -e report``. The runs are the
newest baselines of ``REPORTED`` as the gate chooses them (``perfgate.store.baseline``), and
the report is written by ``perfgate report`` itself, so its first line names the runs.
tests/test_docs.py fails while the committed report names a run older than the newest of its
hardware.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINES = ROOT / "baselines"
REPORTED = ("NVIDIA-H100-80GB-HBM3", "AMD-EPYC-2cores")  # the GPU first, as the report's tables


def newest_runs(baselines: Path = BASELINES, keys: tuple[str, ...] = REPORTED) -> list[Path]:
    """The newest run of each hardware key (the gate's baseline choice), relative to the
    repository root when it lies inside it."""
    from perfgate.store.baseline import choose, key_folder

    paths = []
    for key in keys:
        run, _ = choose(None, key_folder(baselines, key))
        path = run.path.resolve()
        paths.append(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report", metavar="DIR")
    args = parser.parse_args(argv)
    from perfgate.cli import main as perfgate
    from perfgate.store import StoreError

    out = args.out.resolve()
    os.chdir(ROOT)  # the report's first line names the runs as paths from the repository root
    try:
        runs = newest_runs()
    except StoreError as error:
        print(f"lab report: error: {error}", file=sys.stderr)
        return 2
    out = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    return perfgate(["report", *map(str, runs), "--out", str(out)])


if __name__ == "__main__":
    sys.exit(main())
