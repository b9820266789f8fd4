#!/usr/bin/env bash
# A Ctrl-C while pytest-benchmark builds the run to save (after the last case, before perfgate's
# save holds signals): traceback, exit 130, the run neither saved nor kept in unsaved/.
#   repro.sh VENV_PYTHON     (a venv with perfgate and pytest-benchmark)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d) && cd "$dir"
cp "$HERE/conftest_py.txt" conftest.py && cp "$HERE/test_x_py.txt" test_x.py
"$1" -m pytest -p no:cacheprovider test_x.py --benchmark-max-time=0.05 --benchmark-save=x \
  -o perfgate=true 2>&1 | tail -3
echo "exit ${PIPESTATUS[0]}; saved: $(find .benchmarks -name '*.json' 2>/dev/null | wc -l);" \
  "kept: $(find perfgate-results/unsaved -name '*.json' 2>/dev/null | wc -l)"
