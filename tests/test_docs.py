"""The documentation keeps up with the code (in the manner of sqlite-utils' docs tests): every command and
option has help, the generated command reference is current, the README names every command, and the
tests that docs cite as the proof of a promise exist."""
import re
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))

import cli_reference  # noqa: E402

COMMANDS = list(cli_reference.commands(cli_reference.cli, cli_reference._context(cli_reference.cli, "msprof",
                                                                                  None)))


@pytest.mark.parametrize("path,command", [(" ".join(p), c) for p, c, _ in COMMANDS])
def test_every_command_and_option_has_help(path, command):
    assert (command.help or "").strip(), f"{path} has no help text"
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert (param.help or "").strip(), f"{path} {'/'.join(param.opts)} has no help text"


def test_the_command_reference_is_current():
    written = (ROOT / "docs" / "cli-reference.md").read_text(encoding="utf-8")
    assert written == cli_reference.reference(), \
        "docs/cli-reference.md is out of date: python docs/cli_reference.py > docs/cli-reference.md"


def test_the_readme_names_every_command_and_option():
    readme = (ROOT / "README.md").read_text(encoding="utf-8") + (ROOT / "docs" / "collect.md").read_text(
        encoding="utf-8")
    for path, command, _ in COMMANDS[1:]:
        name = " ".join(path)
        assert f"`{name}" in readme or f"{name} " in readme, f"README does not mention {name}"
        for param in command.params:
            if isinstance(param, click.Option) and param.name not in ("help",):
                longest = max(param.opts, key=len)
                assert longest in readme, f"README/collect.md do not mention {name} {longest}"


def _test_names() -> set:
    names = set()
    for path in (ROOT / "tests").glob("test_*.py"):
        names |= set(re.findall(r"^def (test_\w+)", path.read_text(encoding="utf-8"), re.M))
    return names


@pytest.mark.parametrize("doc", ["docs/security.md", "docs/collect.md"])
def test_the_tests_cited_as_proof_exist(doc):
    cited = set(re.findall(r"`(test_\w+)`", (ROOT / doc).read_text(encoding="utf-8")))
    assert cited, f"{doc} cites no test"
    assert cited - _test_names() == set(), f"{doc} cites tests that do not exist"


def test_the_readme_library_example_runs(tmp_path, capsys):
    """The README's library example, run as written on a generated PROF_ directory and two JOBs."""
    from fixtures import profgen
    from fixtures.board import jobgen
    from fixtures.networks import small_job

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [code] = re.findall(r"```python\n(.*?)```", readme, re.S)
    prof = profgen.write_prof(tmp_path / "prof")
    before = jobgen.write_job(tmp_path / "a", small_job(seed="before"))
    after = jobgen.write_job(tmp_path / "b", small_job(seed="after"))
    code = code.replace('"PROF_xxx"', repr(str(prof))).replace('"JOB_before"', repr(str(before))).replace(
        '"JOB_after"', repr(str(after)))
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert isinstance(scope["findings"], list) and scope["document"]["base"] == str(before)
    assert (prof / "device_0" / "summary" / "op_summary.csv").is_file()
    assert list((prof / "device_0" / "timeline").glob("msprof_model1_iter1*.json"))
    assert capsys.readouterr().out == ""                  # fmt=None: the library printed nothing


def test_the_architecture_names_every_module():
    """docs/architecture.md's module list has a line for every module of msprof, and no module that is gone."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## Modules", 1)[1].split("```")[1]
    listed, parents = set(), []
    for line in block.splitlines():
        match = re.match(r"^( *)(\S+)", line)
        if not match or not match.group(2).endswith(("/", ".py")):
            continue
        depth = len(match.group(1)) // 2
        parents[depth:] = [match.group(2)]
        if match.group(2).endswith(".py"):
            listed.add("".join(parents))
    package = ROOT / "msprof"
    modules = {str(path.relative_to(ROOT)).replace("\\", "/") for path in package.rglob("*.py")
               if path.name != "__init__.py" or path.parent.parent.name == "layouts"}
    assert modules - listed == set(), "modules docs/architecture.md does not name"
    assert listed - modules == set(), "modules docs/architecture.md names that do not exist"
