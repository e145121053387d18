"""Run the reference msprof analyser (../shared/reference, read-only) on a *copy* of a PROF directory.

Used by differential tests (pytest marker ``reference``).  Nothing is ever written into the reference
directory: the analyser runs as a subprocess on a copy placed in a caller-supplied work directory, with
``PYTHONDONTWRITEBYTECODE`` set so no ``__pycache__`` appears under the reference tree.
"""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

TABLES = ("op_summary", "op_statistic", "api_statistic", "task_time")
DEFAULT_TIMEOUT = 300


def reference_dir() -> Path:
    env = os.environ.get("MSPROF_REFERENCE_DIR")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2] / "shared" / "reference"


def reference_script() -> Path:
    return reference_dir() / "analysis" / "msprof" / "msprof.py"


def reference_available() -> Tuple[bool, str]:
    ref = reference_dir()
    if not ref.is_dir():
        return False, "reference analyser not found at %s (set MSPROF_REFERENCE_DIR)" % ref
    script = reference_script()
    if not script.is_file():
        return False, "reference analyser entry point missing: %s" % script
    if (ref / "analysis" / "lib64" / "msprof_analysis.so").exists():
        return False, "reference has analysis/lib64/msprof_analysis.so (switches it to a C++ path)"
    return True, "reference analyser at %s" % ref


class ReferenceError(RuntimeError):
    pass


def _run(args: List[str], cwd: Path, timeout: float) -> str:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-B", str(reference_script())] + args
    try:
        proc = subprocess.run(cmd, cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout, universal_newlines=True)
    except subprocess.TimeoutExpired as exc:
        raise ReferenceError("reference timed out after %ss: %s\n%s" % (timeout, " ".join(cmd), exc.output or ""))
    if proc.returncode != 0:
        raise ReferenceError("reference failed (exit %d): %s\n%s" % (proc.returncode, " ".join(cmd), proc.stdout))
    return proc.stdout


def _clean(value: str) -> str:
    return value.strip("\t").strip()


def read_csv(path: Path) -> List[Dict[str, str]]:
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            return []
        return [dict(zip(header, (_clean(v) for v in row))) for row in reader if row]


def read_csv_header(path: Path) -> List[str]:
    with open(path, newline="") as fh:
        return next(csv.reader(fh), [])


def run_reference(prof_dir: Path, workdir: Path, timeline: bool = False,
                  timeout: float = DEFAULT_TIMEOUT, tables=TABLES, export_args=(),
                  analyze: str = "") -> Dict[str, List[Dict[str, str]]]:
    """Copy ``prof_dir`` into ``workdir``, run ``import`` + ``export summary`` (and ``export timeline`` when
    asked; ``export_args``: more arguments of both exports; ``analyze``: the rules of an ``analyze`` run) and
    return ``{table: rows}`` for ``tables`` (default op_summary, op_statistic, api_statistic and task_time; a
    table the reference did not write maps to ``[]``).  Extra keys: ``_headers`` ({table: column list}),
    ``_files`` ({table: Path}), ``_log`` (captured output), ``_dir`` (the copy)."""
    ok, reason = reference_available()
    if not ok:
        raise ReferenceError(reason)
    prof_dir = Path(prof_dir)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    copy = workdir / prof_dir.name
    if copy.exists():
        shutil.rmtree(str(copy))
    shutil.copytree(str(prof_dir), str(copy))
    log = _run(["import", "-dir", str(copy)], workdir, timeout)
    log += _run(["export", "summary", "-dir", str(copy)] + list(export_args), workdir, timeout)
    if timeline:
        log += _run(["export", "timeline", "-dir", str(copy)] + list(export_args), workdir, timeout)
    if analyze:
        log += _run(["analyze", "-dir", str(copy), "-r", analyze], workdir, timeout)
    out_dir = copy / "mindstudio_profiler_output"
    result: Dict[str, object] = {"_headers": {}, "_files": {}, "_log": log, "_dir": copy}
    for table in tables:
        # (the table's name and the export time: aicpu_mi_… is not aicpu's)
        files = sorted(out_dir.glob("%s_[0-9]*.csv" % table)) if out_dir.is_dir() else []
        rows: List[Dict[str, str]] = []
        for f in files:
            rows.extend(read_csv(f))
            result["_headers"][table] = read_csv_header(f)
            result["_files"][table] = f
        result[table] = rows
    return result  # type: ignore[return-value]


if __name__ == "__main__":  # pragma: no cover - manual use
    import json
    import tempfile
    res = run_reference(Path(sys.argv[1]), Path(tempfile.mkdtemp(prefix="msprof_ref_")))
    print(json.dumps({k: v for k, v in res.items() if not k.startswith("_")}, indent=1))
