#!/usr/bin/env bash
# Builds perfgate's wheel from a fresh clone of the perfgate checkout and two fresh virtual
# environments beside two real projects cloned from their snapshots:
#   $ROOT/venv-cattrs  perfgate + cattrs (pure Python; bench/: 64 pytest-benchmark cases)
#   $ROOT/venv-kornia  perfgate + kornia + torch 2.13.0 CPU (benchmarks/color: 15 of its cases)
# Each project's pytest configuration gets `perfgate = true` and `filterwarnings = error`.
set -euo pipefail
ROOT=${ROOT:-/tmp/val}
PERFGATE=${PERFGATE:-/work/main}
BRANCH=${BRANCH:-main}   # measured: wt-validate 5abf4f1 (main a2a6810 + the JSON-parameter fix)
CATTRS_GIT=${CATTRS_GIT:-/work/.mirror/python-attrs+cattrs/repo}
KORNIA_GIT=${KORNIA_GIT:-/work/.mirror/kornia+kornia/repo}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$ROOT" && cd "$ROOT"

git clone -q --branch "$BRANCH" "$PERFGATE" perfgate-src
python3 -m venv buildenv && buildenv/bin/pip install -q build
buildenv/bin/python -m build --wheel -o dist perfgate-src
WHEEL=$(ls dist/perfgate-*.whl)

git clone -q "$CATTRS_GIT" cattrs          # 82b02c0 when measured
git clone -q "$KORNIA_GIT" kornia          # b4f5a78a1 when measured

python3 -m venv venv-cattrs
venv-cattrs/bin/pip install -q "$WHEEL" ./cattrs msgspec orjson
# cattrs: [tool.pytest] (pytest 9's native TOML); `typing_checkers` belongs to pytest-typing,
# installed only on 3.14, so its unknown-option warning is the one warning let through.
python3 - <<'PY'
import pathlib
p = pathlib.Path("cattrs/pyproject.toml")
s = p.read_text()
s = s.replace('typing_checkers = ["mypy"]\n', 'typing_checkers = ["mypy"]\nperfgate = true\n'
              'filterwarnings = ["error", "ignore:Unknown config option:pytest.PytestConfigWarning"]\n')
p.write_text(s)
PY

python3 -m venv venv-kornia
venv-kornia/bin/pip install -q torch==2.13.0          # the CPU build on this disk, first
venv-kornia/bin/pip install -q "$WHEEL" ./kornia
python3 - <<'PY'
import pathlib
p = pathlib.Path("kornia/pyproject.toml")
s = p.read_text()
s = s.replace('filterwarnings = [\n', 'perfgate = true\nfilterwarnings = [\n  "error",\n  "ignore:`torch.jit:DeprecationWarning",\n', 1)
p.write_text(s)
PY
mkdir -p "$ROOT/inject" && cp "$HERE/inject4x.py" "$ROOT/inject/" && cp "$HERE/session.sh" "$ROOT/"
git -C perfgate-src log --oneline -1
