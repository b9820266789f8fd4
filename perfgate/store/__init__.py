"""The baseline store: one folder of pytest-benchmark JSON runs per hardware key.

``baselines/<hardware key>/<machine id>/NNNN_name.json`` keeps pytest-benchmark's own layout
inside each hardware folder, so its tools still read the files. This package is the only code
that reads or writes run files:

- ``reading``: every run is checked once, when loaded (``schema``), and named in one line when
  broken; a folder's runs are ordered by their recorded datetime (aware: a naive one is UTC),
  across every subfolder of the key, symlinked ones included;
- ``baseline``: the one baseline choice of the plugin and the CLI (the run compared against and
  its set; a run dated in the future is no baseline);
- ``writing``: saving is atomic and exclusive: a run is linked to the next free number from a
  file written before, so two saves never share a number and nothing is ever overwritten;
  claims and temporary files name their process (``owners``) and are removed once it is gone;
- ``saving``: a session's run put aside first, then saved unless the session failed;
  ``merge``: workers' or shards' runs joined into one.

``from perfgate import store; store.load(path)``: the functions most callers need, re-exported.
"""

from perfgate.store.reading import (
    RUN_FILE,
    SAVE_HINT,
    NoSuchRun,
    StoreError,
    check_for_comparison_table,
    comparison_entries,
    folder_problem,
    future_message,
    hardware_keys,
    load,
    no_runs_message,
    number_of,
    read_json,
    read_results,
    resolve,
    run_files,
    saved_runs,
)
from perfgate.store.writing import check_save_name, save, save_file, write_json, write_new

__all__ = [
    "RUN_FILE",
    "SAVE_HINT",
    "NoSuchRun",
    "StoreError",
    "check_for_comparison_table",
    "check_save_name",
    "comparison_entries",
    "folder_problem",
    "future_message",
    "hardware_keys",
    "load",
    "no_runs_message",
    "number_of",
    "read_json",
    "read_results",
    "resolve",
    "run_files",
    "save",
    "save_file",
    "saved_runs",
    "write_json",
    "write_new",
]
