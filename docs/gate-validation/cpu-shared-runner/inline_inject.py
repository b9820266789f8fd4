"""Adds instructions to ONE function of the project, from outside it: `-p inline_inject` with this
file (and inline_inject.json beside it) in the project's root, which the counting process has on
its path. inline_inject.json: {"target": "module:Owner.attr", "also": ["module:attr", ...],
"loops": N} or "statements": N. The function is compiled again from its own source with
`for _inject_i in range(N): pass` (or N statements `_inject_i = 0`, about 40 instructions each on
CPython 3.11 under callgrind) as the first statements of its body and put in place of the original
(and at every "also" name):
the extra work is interpreter instructions inside the same frame, so it adds no Python call and no
ATen operator; only the instruction rule can see it."""

import ast
import importlib
import inspect
import json
import textwrap
from pathlib import Path


def _resolve(spec):
    module, _, path = spec.partition(":")
    owner = importlib.import_module(module)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


def _with_extra_work(function, config):
    source = textwrap.dedent(inspect.getsource(function))
    tree = ast.parse(source)
    definition = tree.body[0]
    definition.decorator_list = []
    if "loops" in config:
        extra = f"for _inject_i in range({int(config['loops'])}):\n    pass"
    else:
        extra = "\n".join(["_inject_i = 0"] * int(config["statements"]))
    definition.body[:0] = ast.parse(extra).body
    ast.increment_lineno(tree, function.__code__.co_firstlineno - 1)
    code = compile(tree, inspect.getsourcefile(function), "exec")
    namespace = {}
    exec(code, function.__globals__, namespace)  # noqa: S102
    return namespace[function.__name__]


_config = json.loads(Path(__file__).with_suffix(".json").read_text())
_owner, _name = _resolve(_config["target"])
_patched = _with_extra_work(getattr(_owner, _name), _config)
for _spec in [_config["target"], *_config.get("also", [])]:
    setattr(*_resolve(_spec), _patched)
