"""``perfgate merge``: the shard runs of one CI matrix (``--perf-shard I/N``) joined into one run,
written to ``--out`` and/or saved into the store (``--save NAME``), for the gate and ``compare``.

Exit status: 0 merged; MERGE_REFUSED (3) with one line when the runs are not the N shards of one
run (another hardware key or commit, a case in two shards, a shard missing or given twice, a run
that is no shard); 2 for an unreadable or badly typed run (checked as the store checks every
run: a shard I/N that names no part, a hardware key that is no folder name, a commit that is no
string) or an output that cannot be written. The merged run keeps at most KEPT_ROUNDS rounds a
case, as every run perfgate saves, and is saved only inside ``--baselines``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfgate import arguments, store
from perfgate.cli.command import Command
from perfgate.cli.guard import CommandError
from perfgate.cli.runs import store_root
from perfgate.fields import RunField
from perfgate.progress import Progress
from perfgate.store import lineage
from perfgate.store.merge import MergeError, merge_shards

MERGE_REFUSED = 3
EXAMPLES = """\
  perfgate merge shard-1.json shard-2.json --out merged.json
  perfgate merge shards/*.json --save nightly-merged      # baselines/<key>/<machine>/NNNN_..."""


class Merge(Command):
    name = "merge"
    summary = "join the shard runs of one --perf-shard I/N matrix into one run"
    examples = EXAMPLES
    out_is_file = True

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "shards", nargs="+", metavar="SHARD.json", help="every shard's run file"
        )
        cls.add_out(parser, None, "write the merged run here")
        parser.add_argument(
            "--save",
            metavar="NAME",
            help="save the merged run into the store as the next NNNN_NAME.json "
            "of its hardware key",
        )
        arguments.add_baselines(parser.add_argument, "--baselines")

    @classmethod
    def run(cls, args: argparse.Namespace, out, err) -> int:
        return run_merge(args, out, err)


def run_merge(args: argparse.Namespace, out, err) -> int:
    if not args.out and not args.save:
        raise CommandError("give --out RUN.json, --save NAME, or both")
    if args.save:
        try:
            store.check_save_name(args.save)
        except store.StoreError as error:  # its line names pytest's option; ours is --save
            raise CommandError(str(error).replace("--benchmark-save", "--save")) from None
    runs = []
    with Progress(len(args.shards), "reading shards", err, lines=False) as progress:  # terminal
        for path in args.shards:
            runs.append((path, store.read_json(Path(path))))
            progress.step()
    try:
        merged = merge_shards(runs)
    except MergeError as error:
        raise CommandError(str(error), MERGE_REFUSED, "refused") from None
    cases = len(merged["benchmarks"])
    if args.out:
        print(f"wrote {store.write_new(args.out, merged)} ({cases} cases)", file=out)
    if args.save:
        root = store_root(args.baselines)
        key = merged["machine_info"][RunField.PERFGATE].get(RunField.HARDWARE_KEY) or "unknown"
        folder = root.path / key if root.per_hardware else root.path  # as the plugin saves
        commit = (merged.get("commit_info") or {}).get("id")
        if reason := lineage.not_in_history(commit, Path.cwd()):
            raise CommandError(f"not saved: {reason}")
        try:
            saved = store.save(folder, machine_id(merged["machine_info"]), args.save, merged)
        except OSError as error:
            raise CommandError(f"cannot save into {folder}: {error.strerror}") from None
        print(f"saved {saved} ({cases} cases)", file=out)
    return 0


def machine_id(machine_info: dict) -> str:
    """pytest-benchmark's machine folder (``Linux-CPython-3.12-64bit``) of a run's facts."""
    version = ".".join(str(machine_info.get("python_version", "")).split(".")[:2])
    bits = (machine_info.get("cpu") or {}).get("bits", 64)
    system = machine_info.get("system", "unknown")
    return f"{system}-{machine_info.get('python_implementation', 'Python')}-{version}-{bits}bit"
