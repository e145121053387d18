"""Names that are not UTF-8 (POSIX names are bytes): a collection, a parent of collections or a raw file named
with a byte such as 0xff works end to end, and is printed escaped (``\\xff``). Issue 35 item 6: every command
after the import ended with exit 1 (UnicodeEncodeError in store.uri and in the sources table), a raw file so
named failed the import, and in a parent of several the crash stopped the run."""
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from fixtures import profgen as pg
from fixtures.board import jobgen
from fixtures.networks import small_job

ROOT = Path(__file__).resolve().parents[1]
# what a UTF-8 locale other than C gives Python: stdout refuses what is not UTF-8 (C.UTF-8 lets it through)
STRICT = {"PYTHONIOENCODING": "utf-8:strict"}


def named(path: Path, suffix: bytes) -> Path:
    """``path`` renamed with ``suffix`` (bytes) added to its name."""
    new = Path(os.fsdecode(os.fsencode(path) + suffix))
    os.rename(path, new)
    return new


def msprof(*args, env=None):
    """msprof in a process of its own; stdout and stderr as bytes decoded with surrogateescape (they may hold
    what is not UTF-8: the test then fails on what it finds)."""
    proc = subprocess.run([sys.executable, "-m", "msprof", *map(str, args)], capture_output=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="200", **(env or {})))
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "surrogateescape"),
                                       proc.stderr.decode("utf-8", "surrogateescape"))


def ok(proc):
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    return proc


def test_a_collection_named_with_a_byte_that_is_not_utf8_works_with_every_command(tmp_path):
    job = named(jobgen.write_job(tmp_path, small_job()), b"\xff")
    escaped = job.name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    assert escaped.endswith("\\xff")
    imported = ok(msprof("import", "-dir", job, env=STRICT))
    assert f"imported {tmp_path / escaped} -> {tmp_path / escaped}/sqlite/msprof.db" in imported.stderr
    for command in (["export", "summary"], ["export", "summary", "--format", "json"], ["export", "timeline"],
                    ["show"], ["query"], ["advise"], ["advise", "--format", "json"]):
        ok(msprof(*command, "-dir", job, env=STRICT))
    assert sorted(p.name for p in (job / "summary").iterdir()) and sorted(p.name for p in (job / "timeline").iterdir())
    shown = ok(msprof("show", "-dir", job, "--format", "json", env=STRICT))
    document = json.loads(shown.stdout)            # (valid UTF-8 and JSON: the name escaped, as it is printed)
    [(label, section)] = document.items()
    assert label == escaped and section["path"] == str(tmp_path / escaped)
    compared = ok(msprof("compare", job, job, "--format", "json", env=STRICT))
    assert json.loads(compared.stdout)["base"] == str(tmp_path / escaped)


def test_raw_files_and_a_parent_named_with_such_bytes_are_read_and_recorded(tmp_path):
    """A parent of a JOB and a PROF_, itself named with 0xfe, both collections named with bytes that are not UTF-8,
    and raw files so named (one a copy of a slice msprof does not read, one where a hash_dic slice's number
    belongs): every collection is imported, its sources recorded by an escaped name, and the database then
    found current (nothing imported again) until a file changes, when its digest is read through the real name."""
    parent = Path(os.fsdecode(os.fsencode(tmp_path) + b"/runs\xfe"))
    parent.mkdir()
    job = named(jobgen.write_job(parent, small_job()), b"\xff")
    prof = named(pg.write_prof(parent), b"\xe9\xff")
    odd = Path(os.fsdecode(os.fsencode(job / "data") + b"/notes\xff.txt"))
    odd.write_bytes(b"not raw data")
    host = prof / "host" / "data"
    [hash_dic] = sorted(host.glob("*hash_dic*"))[:1]
    Path(os.fsdecode(os.fsencode(host) + b"/aging.additional.hash_dic.slice_\xff")).write_bytes(hash_dic.read_bytes())
    proc = ok(msprof("export", "summary", "-dir", parent, env=STRICT))
    assert "\\xfe" in proc.stderr
    for result in (job, prof / "host", prof / "device_0"):
        assert (result / "sqlite" / "msprof.db").is_file()
    with contextlib.closing(sqlite3.connect(job / "sqlite" / "msprof.db")) as conn:
        recorded = {p for (p,) in conn.execute("SELECT path FROM source_file")}
    assert "data/notes\\xff.txt" in recorded
    again = ok(msprof("show", "-dir", parent, "-v", env=STRICT))
    assert "importing" not in again.stderr, again.stderr          # current: not imported again
    os.utime(odd, ns=(1, 1))                                      # another time, the same bytes: hashed again
    again = ok(msprof("show", "-dir", parent, "-v", env=STRICT))
    assert "importing" not in again.stderr, again.stderr
    odd.write_bytes(b"other bytes!")                              # changed: imported again
    again = ok(msprof("show", "-dir", parent, "-v", env=STRICT))
    assert "data/notes\\xff.txt changed" in again.stderr, again.stderr
