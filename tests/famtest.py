"""What the families' tests share: generate a family scenario (fixtures/families), run the reference analyser
on a copy, and import the same directory with msprof (the families are in its PROF databases) — the
reference's rows against the rows msprof's report functions print, or its exported files."""
from __future__ import annotations

import csv
import sqlite3
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fixtures import families as famgen  # noqa: E402
from reference_runner import reference_available, run_reference  # noqa: E402



def need_reference():
    ok, reason = reference_available()
    if not ok:
        print("SKIP reference test:", reason)
        pytest.skip(reason)


def generate(tmp_path: Path, desc: dict) -> famgen.Written:
    return famgen.write(tmp_path / "gen", desc)


def reference(written: famgen.Written, tmp_path: Path, tables, **kwargs) -> dict:
    """The reference's rows of ``tables``, each row the list of its cells (TABs stripped), and the headers."""
    result = run_reference(written.path, tmp_path / "ref", tables=tuple(tables), **kwargs)
    # (read again as lists: a header may repeat a name, as step_trace's reduce columns do)
    rows = {t: _rows(result["_files"][t]) if t in result["_files"] else [] for t in tables}
    return {"rows": rows, "headers": result["_headers"], "dir": result["_dir"], "log": result["_log"]}


def _rows(path: Path) -> List[List[str]]:
    with open(path, newline="") as handle:
        lines = list(csv.reader(handle))
    return [[cell[:-1] if cell.endswith("\t") else cell for cell in line] for line in lines[1:] if line]


def msprof_db(written: famgen.Written, tmp_path: Path, role: str = "device") -> Tuple[sqlite3.Connection, object]:
    """msprof's database of the device (the host's attached as ``host``) or of the host, after ``msprof
    import``, and that directory's clock context."""
    from msprof import api
    from msprof.collection import read_result_dir
    from msprof.layouts.prof.families.base import Context

    device = written.path / ("device_%d" % written.prof.desc["device_id"])
    host = written.path / "host"
    if not (device / "sqlite" / "msprof.db").is_file():
        api.import_collection(written.path)
    if role == "host":
        return sqlite3.connect(str(host / "sqlite" / "msprof.db")), Context(read_result_dir(host))
    conn = sqlite3.connect(str(device / "sqlite" / "msprof.db"))
    conn.execute("ATTACH DATABASE ? AS host", (str(host / "sqlite" / "msprof.db"),))
    return conn, Context(read_result_dir(device))


def with_device(device: str, columns: List[str], rows: List[List[str]]) -> Tuple[List[str], List[List[str]]]:
    """The merged file's Device_id column in front, as the reference's summary writes it."""
    return ["Device_id"] + columns, [[device] + row for row in rows]


def assert_same(ours: Tuple[List[str], List[List[str]]], ref_header: List[str], ref_rows: List[List[str]]) -> int:
    """Header and every cell the same; returns the rows matched."""
    columns, rows = ours
    assert columns == ref_header
    assert len(rows) == len(ref_rows), (rows, ref_rows)
    for i, (a, b) in enumerate(zip(rows, ref_rows)):
        assert a == b, "row %d: msprof %r, reference %r" % (i, a, b)
    return len(rows)


def msprof_databases(written: famgen.Written, tmp_path: Path, role: str = "host") -> Tuple[sqlite3.Connection, object]:
    """msprof's device database with the host's attached (the families' tables in both), and the device's
    clock context (``role``: kept for the callers that named the family's side)."""
    return msprof_db(written, tmp_path, "device")


def agree(tmp_path: Path, desc: dict, tables: List[str], ours, **reference_args) -> Tuple[famgen.Written, dict]:
    """Generate ``desc``, run the reference on a copy (before msprof imports: its databases stay out of the
    copy), then compare each of ``tables`` that ``ours(written, tmp_path)`` returns ({table: (columns with
    Device_id, rows)}) with the reference's; returns the written data and the rows matched per table."""
    need_reference()
    written = generate(tmp_path, desc)
    ref = reference(written, tmp_path, tables, **reference_args)
    computed = ours(written, tmp_path)
    return written, {t: assert_same(computed[t], ref["headers"][t], ref["rows"][t]) for t in tables}
