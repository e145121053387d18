"""The import graph runs one way (docs/architecture.md "Layers"), read from the code's own imports.

import-linter checks the layers of pyproject.toml ([tool.importlinter]); grimp, the graph it is built on,
finds cycles inside each package (a deferred import inside a function is an import too). Both read the
source files: nothing of msprof is imported to check it.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

grimp = pytest.importorskip("grimp", reason="import-linter (the test extra: pip install -e '.[test]') is missing")


def _lint(cwd: Path, path: str = "") -> subprocess.CompletedProcess:
    """import-linter on the msprof that ``path`` (PYTHONPATH) finds, in a process of its own: it configures
    logging as a command does, which would silence msprof's log in this one."""
    check = ("import sys; from importlinter.cli import lint_imports; "
             f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True))")
    env = dict(os.environ, PYTHONPATH=path) if path else None
    return subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=cwd, env=env)


def test_the_layers_hold():
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_no_import_cycle():
    graph = grimp.build_graph("msprof", exclude_type_checking_imports=True, cache_dir=None)
    packages = sorted(module for module in graph.modules if graph.find_children(module))
    assert {"msprof", "msprof.layouts", "msprof.layouts.prof", "msprof.decode"} <= set(packages)
    cycles = {package: graph.nominate_cycle_breakers(package) for package in packages}
    assert {package: found for package, found in cycles.items() if found} == {}


def test_the_checks_see_what_they_forbid(tmp_path):
    """The same checks on a copy of msprof with two imports that break them: one up the layers (decode
    importing the layouts), one closing a cycle (the layouts' base importing a layout, deferred)."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "msprof", copy / "msprof", ignore=shutil.ignore_patterns("__pycache__", "demo_data"))
    with open(copy / "msprof" / "decode" / "freq.py", "a") as handle:
        handle.write("\nfrom msprof.layouts import find_units  # noqa\n")
    with open(copy / "msprof" / "layouts" / "base.py", "a") as handle:
        handle.write("\n\ndef _late():\n    from msprof.layouts.job import JobLayout  # noqa\n")
    # (run in the copy: import-linter puts the directory it runs in first on the path)
    done = _lint(copy, str(copy))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "msprof.decode.freq -> msprof.layouts" in done.stdout
    check = ("import grimp; graph = grimp.build_graph('msprof', exclude_type_checking_imports=True, cache_dir=None);"
             " print(sorted(sorted(edge) for edge in graph.nominate_cycle_breakers('msprof.layouts')))")
    found = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=copy,
                           env=dict(os.environ, PYTHONPATH=str(copy)))
    assert found.stdout == "[['msprof.layouts.base', 'msprof.layouts.job']]\n", found.stderr   # (either import)
