"""The harness's stages stay in order: the data flows measure -> store -> verdict -> report, and
only ``perfgate/plugin.py`` talks to pytest through hooks.

Each rule is a function over a package folder that returns what breaks it; the tests run them
over ``perfgate/`` (nothing may break), then over a small package made to break each rule, so a
rule that stopped seeing its breach fails here too.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "perfgate"
MAX_LINES = 300

STAGES = ("perfgate.measure", "perfgate.store", "perfgate.verdict", "perfgate.report",
          "perfgate.session", "perfgate.ab", "perfgate.cli", "perfgate.plugin")  # fmt: skip
# the ground floor: the model, its stored names, statistics, output paths, a matrix's parts
GROUND = ("benchmark.py", "fields.py", "stats.py", "environment.py", "outputs.py", "parts.py",
          "format.py")  # fmt: skip
# a stage folder, or a module of the top level, -> the modules it must never import. ab/ (the
# A/B and the nightly) sits beside cli/: it runs child processes and uses store, verdict and
# report; only cli/ uses it.
NEVER = {
    # never re-runs a session, never reads the options: what it measures is handed to it
    "measure": ("perfgate.verdict", "perfgate.report", "perfgate.cli", "perfgate.store",
                "perfgate.session", "perfgate.plugin", "perfgate.ab", "perfgate.options",
                "perfgate.arguments"),
    "verdict": ("perfgate.measure", "perfgate.store", "perfgate.report", "perfgate.cli",
                "perfgate.plugin", "perfgate.session", "perfgate.ab", "pytest", "torch"),
    # keeps what was measured; never measures
    "store": ("perfgate.measure", "perfgate.verdict", "perfgate.report", "perfgate.cli",
              "perfgate.plugin", "perfgate.session", "perfgate.ab"),
    "report": ("perfgate.cli", "perfgate.plugin", "perfgate.session", "perfgate.ab", "pytest"),
    # one pytest session: called by plugin.py, never by the command line
    "session": ("perfgate.ab", "perfgate.cli", "perfgate.plugin"),
    "ab": ("perfgate.cli", "perfgate.plugin", "perfgate.session", "torch"),
    # thin: reads through the store, judges through the verdict, shows through the report
    "cli": ("perfgate.measure", "perfgate.session", "perfgate.plugin"),
    "plugin.py": ("perfgate.cli", "perfgate.ab"),
    # its types parse a threshold given with the verdict's parser; nothing else of perfgate
    "options.py": tuple(stage for stage in STAGES if stage != "perfgate.verdict"),
    "arguments.py": tuple(stage for stage in STAGES if stage != "perfgate.verdict"),
    "hookspec.py": ("perfgate",),
    "_pytest_benchmark.py": STAGES,  # pytest-benchmark's internals, for measure and session
    "__init__.py": STAGES,
    **dict.fromkeys(GROUND, (*STAGES, "perfgate._pytest_benchmark", "perfgate.options", "pytest")),
}  # fmt: skip
# this repository's own code, which no module of the harness imports: its suite is perfgate's
# first user, not a part of it
OUR_OWN = ("lab", "perf_tests", "kernels")
# what a stage may import of a module NEVER forbids it: the command line names this machine (the
# hardware folder of its runs) as a session does, and measures nothing
ALLOWED = {"cli": ("perfgate.measure.machine",)}
# modules run by path in a child process, never imported: only the standard library and pytest
STANDALONE = {"ab/server.py"}
# imported by every pytest session, asked or not: nothing of perfgate when it is imported
# (a light module -> the modules of perfgate it may import when imported, themselves light)
LIGHT_MODULES = {"options.py": {"perfgate.arguments"}, "arguments.py": set()}
HOOK_MODULES = {"plugin.py"}  # hookspec.py declares a hook for projects; it implements none
SPEC_MODULES = {"hookspec.py"}


def _modules(package: Path):
    for path in sorted(package.rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def _dotted(path: Path, package: Path) -> list[str]:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported(path: Path, tree: ast.Module, package: Path) -> set[str]:
    """Every module that ``path`` imports, anywhere in it, as dotted names (``from a import b``
    gives ``a`` and ``a.b``: b may be a module)."""
    here = _dotted(path, package)
    if path.name != "__init__.py":
        here = here[:-1]  # the package this module is in
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _place(path: Path, package: Path) -> str:
    """The stage folder of a module (``measure``), or its name on the top level (``gate.py``)."""
    return path.relative_to(package).parts[0]


def import_breaches(package: Path) -> list[str]:
    breaches = []
    for path, tree in _modules(package):
        forbidden = NEVER.get(_place(path, package), ()) + OUR_OWN
        allowed = ALLOWED.get(_place(path, package), ())
        for name in sorted(imported(path, tree, package)):
            hit = [f for f in forbidden if name == f or name.startswith(f + ".")]
            if any(name == a or name.startswith(a + ".") for a in allowed):
                hit = []
            if hit:
                breaches.append(f"{path.relative_to(package.parent)} imports {name}")
    return breaches


def _eager(tree: ast.Module) -> ast.Module:
    """The statements that run when the module is imported: not functions, classes or
    ``if TYPE_CHECKING:`` blocks."""
    kept = [
        node
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Try))
        or (isinstance(node, ast.If) and getattr(node.test, "id", None) != "TYPE_CHECKING")
    ]
    return ast.Module(body=kept, type_ignores=[])


def eager_breaches(package: Path) -> list[str]:
    breaches = []
    for path, tree in _modules(package):
        if path.parent == package and path.name in LIGHT_MODULES:
            allowed = LIGHT_MODULES[path.name]
            names = imported(path, _eager(tree), package)
            names = {n for n in names if not any(n == a or n.startswith(a + ".") for a in allowed)}
            breaches += [f"{path.name} imports {name} when imported" for name in sorted(names)
                         if name == "perfgate" or name.startswith("perfgate.")]  # fmt: skip
    return breaches


def hook_breaches(package: Path) -> list[str]:
    breaches = []
    for path, tree in _modules(package):
        if path.name in HOOK_MODULES | SPEC_MODULES and path.parent == package:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
                "pytest_"
            ):
                breaches.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.name}")
            if isinstance(node, ast.Attribute) and node.attr == "register":
                if isinstance(node.value, ast.Attribute) and node.value.attr == "pluginmanager":
                    breaches.append(f"{path.relative_to(package.parent)}:{node.lineno} registers")
    return breaches


def size_breaches(package: Path) -> list[str]:
    return [
        f"{path.relative_to(package.parent)} has {n} lines"
        for path in sorted(package.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    ]


def standalone_breaches(package: Path) -> list[str]:
    """A module run by path in a child (the A/B's block process) imports nothing of perfgate:
    the tree it serves may hold another perfgate."""
    breaches = []
    for name in sorted(STANDALONE):
        path = package / name
        if not path.is_file():
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        breaches += [f"{name} imports {n}" for n in sorted(imported(path, tree, package))
                     if n == "perfgate" or n.startswith("perfgate.")]  # fmt: skip
    return breaches


RULES = (import_breaches, eager_breaches, hook_breaches, size_breaches, standalone_breaches)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_perfgate_keeps_its_layers(rule):
    assert rule(PACKAGE) == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "perfgate"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


@pytest.mark.parametrize(
    "files, breach",
    [
        ({"measure/timing.py": "from perfgate.verdict import rules\n"}, "measure/timing.py"),
        ({"measure/timing.py": "def f():\n    from perfgate import verdict\n"}, "measure/"),
        ({"measure/timing.py": "from ..verdict.rules import X\n"}, "perfgate.verdict.rules"),
        ({"verdict/judge.py": "from perfgate import store\n"}, "imports perfgate.store"),
        ({"verdict/judge.py": "import perfgate.report.tables\n"}, "perfgate.report.tables"),
        ({"verdict/judge.py": "from perfgate.cli import main\n"}, "perfgate.cli"),
        ({"verdict/judge.py": "import pytest\n"}, "imports pytest"),
        ({"verdict/rules.py": "from perfgate.measure.launch_counts import KEY\n"}, "measure"),
        ({"verdict/judge.py": "from . import x\nfrom ..store import load\n"}, "perfgate.store"),
        ({"verdict/nightly.py": "from perfgate.ab import compare\n"}, "perfgate.ab"),
        ({"ab/night.py": "from perfgate.cli.runs import Hardware\n"}, "perfgate.cli.runs"),
        ({"report/ab.py": "from perfgate.ab.compare import AbRun\n"}, "perfgate.ab"),
        ({"measure/profiler.py": "from perfgate.session import reruns\n"}, "perfgate.session"),
        ({"store/baseline.py": "from perfgate.session.baseline import x\n"}, "perfgate.session"),
        ({"session/gate.py": "from perfgate.cli import main\n"}, "session/gate.py imports"),
        ({"cli/runs.py": "from perfgate.measure.timing import measure\n"}, "measure"),
        ({"store/baseline.py": "from perfgate.measure.machine import x\n"}, "perfgate.measure"),
        ({"store/reading.py": "from perfgate import measure\n"}, "store/reading.py imports"),
        ({"measure/callgrind.py": "from perfgate.options import X\n"}, "perfgate.options"),
        ({"measure/gpu.py": "from perfgate import options\n"}, "perfgate.options"),
        ({"cli/ab.py": "from perfgate.session.gate import ab_hint\n"}, "perfgate.session"),
        ({"cli/compare.py": "from perfgate import plugin\n"}, "perfgate.plugin"),
        ({"plugin.py": "from perfgate.cli import main\n"}, "plugin.py imports perfgate.cli"),
        ({"options.py": "def f():\n    from perfgate.store import x\n"}, "options.py imports"),
        ({"hookspec.py": "import perfgate.fields\n"}, "hookspec.py imports perfgate.fields"),
        ({"_pytest_benchmark.py": "from perfgate import store\n"}, "perfgate.store"),
        ({"__init__.py": "from perfgate.cli import main\n"}, "__init__.py imports perfgate.cli"),
        ({"benchmark.py": "from perfgate.verdict.rules import x\n"}, "benchmark.py imports"),
        ({"outputs.py": "import pytest\n"}, "outputs.py imports pytest"),
        ({"stats.py": "from perfgate.options import read\n"}, "perfgate.options"),
        ({"parts.py": "from perfgate.session import sharding\n"}, "parts.py imports"),
        ({"report/tables.py": "from lab.common import Case\n"}, "imports lab.common"),
        ({"cli/compare.py": "import perf_tests.suite\n"}, "imports perf_tests"),
        ({"measure/timing.py": "from kernels.mxint8 import x\n"}, "imports kernels"),
    ],
)
def test_a_stage_importing_a_later_one_is_caught(tmp_path, files, breach):
    found = import_breaches(_package(tmp_path, files))
    assert len(found) >= 1 and breach in found[0], found


def test_allowed_imports_are_not_breaches(tmp_path):
    package = _package(
        tmp_path,
        {
            "measure/timing.py": "from perfgate import benchmark, stats\n",
            "verdict/judge.py": "from perfgate.benchmark import Run\nfrom . import rules\n",
            "cli/compare.py": "from perfgate import store, verdict, report\n",
            "cli/runs.py": "from perfgate.measure.machine import this_machine_key\n",
            "session/gate.py": "from perfgate import measure, store, verdict, options\n",
            "plugin.py": "from perfgate import options, session, measure\n",
            "benchmark.py": "from perfgate.fields import Field\nfrom perfgate import stats\n",
            "__main__.py": "from perfgate.cli import main\n",
        },
    )
    assert import_breaches(package) == []


@pytest.mark.parametrize(
    "files",
    [
        {"gate.py": "def pytest_sessionfinish(session):\n    pass\n"},
        {"measure/profiler.py": "class P:\n    def pytest_runtestloop(self, s):\n        pass\n"},
        {"sharding.py": "def configure(config):\n    config.pluginmanager.register(object())\n"},
    ],
)
def test_a_hook_outside_the_plugin_is_caught(tmp_path, files):
    package = _package(
        tmp_path, {"plugin.py": "def pytest_configure(config):\n    pass\n", **files}
    )
    assert len(hook_breaches(package)) == 1


def test_a_block_process_module_importing_perfgate_is_caught(tmp_path):
    package = _package(tmp_path, {"ab/server.py": "import json\nfrom perfgate import store\n"})
    assert standalone_breaches(package) == [
        "ab/server.py imports perfgate",
        "ab/server.py imports perfgate.store",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "from perfgate.verdict.thresholds import parse_fraction\n",
        "try:\n    import perfgate.fields\nexcept ImportError:\n    pass\n",
        "from perfgate import options\n",
        "from perfgate.arguments import add_count\nfrom perfgate.fields import Field\n",
    ],
)
def test_a_light_module_importing_perfgate_when_imported_is_caught(tmp_path, text):
    found = eager_breaches(_package(tmp_path, {"options.py": text}))
    assert found and all(line.startswith("options.py imports perfgate") for line in found)


def test_a_light_module_may_import_perfgate_where_it_is_used(tmp_path):
    lazy = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from perfgate import x\n"
        "def f():\n    from perfgate.verdict import thresholds\n"
    )
    assert eager_breaches(_package(tmp_path, {"options.py": lazy})) == []


def test_a_long_module_is_caught(tmp_path):
    package = _package(tmp_path, {"store/runs.py": "x = 1\n" * (MAX_LINES + 1), "ok.py": "x = 1\n"})
    assert size_breaches(package) == [f"perfgate/store/runs.py has {MAX_LINES + 1} lines"]
