"""The documentation site: its reference names every command and option the parsers know (read
independently, from the parsers' own help), every verdict word, rule and stored field; every
generated section is on a page; and the committed lab report is not older than the baselines it
names. (`mkdocs build --strict` in tox -e tests checks links and anchors.)"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "tools"))

import docs_reference  # noqa: E402

import lab.__main__ as lab_report  # noqa: E402

OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def page(name: str) -> str:
    """A reference page as the site shows it: its markers expanded."""
    return docs_reference.expand((DOCS / "reference" / name).read_text(encoding="utf-8"))


def options_in_usage(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string the parser's own usage line shows (argparse writes it apart from the
    generator's table)."""
    return set(OPTION.findall(parser.format_usage().split(parser.prog, 1)[1]))


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of every argument the parser shows in its help."""
    shown = [a for a in parser._actions if a.help != argparse.SUPPRESS]
    return {option for action in shown for option in action.option_strings}


def missing_from(reference: str, parser: argparse.ArgumentParser) -> list[str]:
    """Each command of ``parser`` without its section in ``reference``, and each option a
    command's usage or arguments show that its section does not name."""
    missing = []
    for name, sub in docs_reference.subcommands(parser).items():
        heading = f"## perfgate {name}\n"
        if heading not in reference:
            missing.append(f"perfgate {name}")
        section = reference.split(heading, 1)[-1].split("\n## ", 1)[0]
        for option in sorted(options_in_usage(sub) | option_strings(sub)):
            if f"`{option}" not in section and f", {option}" not in section:
                missing.append(f"perfgate {name} {option}")
    return missing


def test_every_perfgate_command_and_option_is_in_the_reference():
    from perfgate.cli import build_parser

    parser = build_parser()
    assert docs_reference.subcommands(parser), "the generator found no command in the parser"
    missing = missing_from(page("cli.md"), parser)
    assert not missing, f"not in docs/reference/cli.md: {missing}"


def test_a_command_or_option_left_out_of_the_reference_is_found():
    parser = argparse.ArgumentParser(prog="perfgate")
    commands = parser.add_subparsers(dest="command")
    compare = commands.add_parser("compare", help="compare two runs")
    compare.add_argument("--alpha", type=float, help="significance level")
    reference = docs_reference.cli_reference(parser)
    assert missing_from(reference, parser) == []
    without_alpha = "\n".join(line for line in reference.splitlines() if "--alpha" not in line)
    assert missing_from(without_alpha, parser) == ["perfgate compare --alpha"]
    commands.add_parser("merge", help="join shards")
    assert missing_from(reference, parser) == ["perfgate merge"]


def pytest_help() -> str:
    """pytest's own --help in this repository: every option and ini setting registered."""
    command = [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_pytest_option_and_ini_setting_of_perfgate_and_the_suite_is_in_the_reference():
    help_text = pytest_help()
    reference = page("pytest.md")
    options = set(re.findall(r"^\s+(--perf-[\w-]+|--device)\b", help_text, re.MULTILINE))
    ini = set(re.findall(r"^\s+(perfgate\w*)\s", help_text, re.MULTILINE))
    assert "--perf-gate" in options and "perfgate_baselines" in ini  # the help was read
    missing = [o for o in sorted(options) if f"`{o}" not in reference]
    missing += [i for i in sorted(ini) if f"`{i}`" not in reference]
    assert not missing, f"not in docs/reference/pytest.md: {missing}"


def test_the_suites_options_name_its_tiers():
    from perf_tests import options, suite

    assert tuple(suite.TIERS) == options.TIER_NAMES


def test_every_marker_and_hook_is_in_the_reference():
    import perfgate.hookspec
    from perfgate.options import MARKERS

    reference = page("pytest.md")
    for marker in MARKERS:
        assert f"@pytest.mark.{marker.split('(')[0].split(':')[0]}" in reference
    hooks = [n for n in dir(perfgate.hookspec) if n.startswith("pytest_")]
    assert hooks and all(f"`{hook}(" in reference for hook in hooks)


def test_every_verdict_word_reason_and_rule_is_in_the_reference():
    from perfgate.verdict.outcome import Verdict
    from perfgate.verdict.reason import Reason
    from perfgate.verdict.rules import RULES

    reference = page("verdicts.md")
    assert all(f"| `{verdict.value}` |" in reference for verdict in Verdict)
    assert all(f"| `{reason.value}` |" in reference for reason in Reason)
    names = [rule.name for rules in RULES.values() for rule in rules]
    assert names and all(f"| `{name}` |" in reference for name in names)


def test_every_stored_field_is_in_the_reference():
    from perfgate import fields

    reference = page("runs.md")
    stored = [
        value
        for cls in (fields.Field, fields.RunField, fields.Declared, fields.Clock)
        for name, value in vars(cls).items()
        if name.isupper()
    ]
    assert stored and all(f"`{value}`" in reference for value in stored)


def test_every_field_of_a_gate_json_row_is_in_the_reference():
    import dataclasses

    from perfgate.verdict.rows import GateRow

    reference = page("runs.md")
    names = [f.name for f in dataclasses.fields(GateRow)]
    assert names and all(f"| `{name}` |" in reference for name in names)


EXIT_CONSTANT = re.compile(r"^([A-Z_]+) = (\d+)\s+# exit status", re.MULTILINE)


def exit_constants() -> dict[str, int]:
    """Every constant the code declares an exit status with (``NAME = N  # exit status ...``)."""
    found = {}
    for path in (ROOT / "perfgate").rglob("*.py"):
        for name, value in EXIT_CONSTANT.findall(path.read_text(encoding="utf-8")):
            found[f"{path.relative_to(ROOT)}:{name}"] = int(value)
    return found


def test_every_exit_status_the_code_declares_is_in_the_table():
    from perfgate.cli.merge import MERGE_REFUSED

    declared = exit_constants()
    assert "perfgate/store/saving.py:SAVE_FAILED" in declared  # the scan finds them
    reference = statuses(page("exit-codes.md"))
    missing = {name: n for name, n in declared.items() if n not in reference}
    assert not missing, f"exit statuses not in docs/reference/exit-codes.md: {missing}"
    assert {0, 1, 2, 4, MERGE_REFUSED} <= reference


def statuses(table_text: str) -> set[int]:
    return {int(n) for n in re.findall(r"^\| (\d+) \|", table_text, re.MULTILINE)}


def test_the_readmes_exit_codes_are_the_references():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert statuses(table) == statuses(page("exit-codes.md"))


def layout_sections(shown: str) -> dict[str, str]:
    """The layout page's text under each ``### `folder/` `` heading, by folder."""
    parts = re.split(r"^### `([\w/]+)/`$", shown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_module_of_perfgate_is_on_the_layout_page():
    sections = layout_sections(page("layout.md"))
    missing = []
    for path in sorted((ROOT / "perfgate").rglob("*.py")):
        folder = path.parent.relative_to(ROOT).as_posix()
        text = sections.get(folder, "")
        if path.name == "__init__.py":
            said = text.strip().split("\n")[0] if text.strip() else ""
            shown = bool(said) and not said.startswith("|")
        else:
            shown = re.search(rf"^\| `{re.escape(path.name)}` \| (?!-)\S", text, re.MULTILINE)
        if not shown:
            missing.append(path.relative_to(ROOT).as_posix())
    assert not missing, f"modules missing from docs/reference/layout.md: {missing}"


def test_a_module_without_a_docstring_fails_the_layout(tmp_path):
    package = tmp_path / "perfgate"
    (package / "store").mkdir(parents=True)
    (package / "__init__.py").write_text('"""The harness."""\n')
    (package / "store" / "__init__.py").write_text('"""The store. It keeps runs."""\n')
    (package / "store" / "new.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="new.py: no docstring"):
        docs_reference.layout_reference(package)
    (package / "store" / "new.py").write_text('"""Keeps a run. Then more."""\nx = 1\n')
    sections = layout_sections(docs_reference.layout_reference(package))
    assert sections["perfgate"].strip() == "The harness."
    assert sections["perfgate/store"].strip().startswith("The store.\n")
    assert "| `new.py` | Keeps a run. |" in sections["perfgate/store"]


def test_every_generated_section_is_on_a_page_and_every_marker_names_one():
    pages = [path.read_text(encoding="utf-8") for path in DOCS.rglob("*.md")]
    used = {name for text in pages for name in docs_reference.MARKER.findall(text)}
    assert used == set(docs_reference.SECTIONS)


def test_a_marker_naming_no_section_fails_the_build():
    with pytest.raises(KeyError):
        docs_reference.expand("<!-- reference: no-such-section -->")


def test_a_table_cell_shows_text_as_written():
    assert docs_reference.cell("DIR/<key>/ a|b") == r"DIR/&lt;key&gt;/ a\|b"
    assert docs_reference.cell("keeps `a<b>` and ``c<d>``") == "keeps `a<b>` and ``c<d>``"
    assert docs_reference.cell("") == "-"


# --- the lab report ---------------------------------------------------------------------------
REPORT = DOCS / "report" / "report.md"


def reported_runs(report: str) -> list[Path]:
    """The run files the report's first line names (`Generated by python -m lab RUN ...`)."""
    command = re.search(r"^Generated by `python -m lab (.*?)`", report, re.MULTILINE)
    assert command, "the report does not say which runs it was generated from"
    return [ROOT / arg for arg in command.group(1).split() if arg.endswith(".json")]


def stale(runs: list[Path]) -> list[str]:
    """Each named run that is not the newest baseline of its hardware folder, with the newest."""
    from perfgate.store.baseline import choose

    older = []
    for run in runs:
        newest, _ = choose(None, run.parent.parent)
        if newest.path.resolve() != run.resolve():
            older.append(f"{run.name} (newest: {newest.path.name})")
    return older


def test_the_committed_report_is_not_older_than_the_baselines_it_names():
    runs = reported_runs(REPORT.read_text(encoding="utf-8"))
    assert {run.parent.parent.name for run in runs} == set(lab_report.REPORTED)
    older = stale(runs)
    assert not older, f"docs/report/ is older than its baselines: {older}; run tox -e report"


def test_the_staleness_check_sees_an_older_run():
    folder = ROOT / "baselines" / "AMD-EPYC-2cores"
    runs = sorted(folder.rglob("0*.json"))
    assert len(runs) >= 2
    assert stale([runs[0]]) and not stale([runs[-1]])


def test_the_report_shows_the_fused_linear():
    assert "mxint8_fused" in REPORT.read_text(encoding="utf-8")


def test_the_report_tool_names_the_newest_run_of_each_hardware():
    runs = [ROOT / path for path in lab_report.newest_runs()]
    assert [run.parent.parent.name for run in runs] == list(lab_report.REPORTED)
    assert not stale(runs)
