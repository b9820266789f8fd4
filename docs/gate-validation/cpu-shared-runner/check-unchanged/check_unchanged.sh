#!/usr/bin/env bash
# Three unchanged `perfgate check` sessions on cattrs from the built wheel (see README.md beside it).
set -uo pipefail
ROOT=/tmp/chk; cd $ROOT
git clone -q /work/main perfgate-src && python3 -m venv buildenv && buildenv/bin/pip install -q build && buildenv/bin/python -m build --wheel -o dist perfgate-src >/dev/null 2>&1
WHEEL=$(ls dist/perfgate-*.whl); echo "wheel $WHEEL"
git clone -q /work/.mirror/python-attrs+cattrs/repo cattrs
python3 -m venv venv && venv/bin/pip install -q "$WHEEL" ./cattrs msgspec orjson
# cattrs's pytest settings as ../setup.sh gives them: perfgate on, warnings are errors
sed -i 's/^typing_checkers = \["mypy"\]$/&\nperfgate = true\nfilterwarnings = ["error", "ignore:Unknown config option:pytest.PytestConfigWarning"]/' cattrs/pyproject.toml
cd cattrs && git -c user.email=a@b -c user.name=a commit -qam "perfgate on" && git log --oneline -1
export PATH=$ROOT/venv/bin:$PATH
date; pytest bench -q -p no:cacheprovider --perf-gate --perf-first-baseline > $ROOT/baseline.log 2>&1; echo "baseline exit $?"; date
for i in 1 2 3; do
  perfgate check --tests bench --results $ROOT/results-$i > $ROOT/check-$i.out 2> $ROOT/check-$i.err; echo "check $i exit $?"; date
  tail -3 $ROOT/check-$i.err
done
