"""A collection from someone else's machine (docs/security.md "Trusting nothing a collection ships"): its
bookkeeping files, databases and names, through the real CLI on real files. Nothing it ships is believed,
opened when it is not a regular file, read beyond a bound, or allowed to make msprof delete, run or show what
its sender chose."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.board import jobgen
from fixtures.networks import small_job

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")


def no_traceback(proc):
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


def named_job(tmp_path, name: str) -> Path:
    """small_job with its first layer renamed."""
    desc = small_job()
    desc["models"][0]["layers"][0]["name"] = name
    return jobgen.write_job(tmp_path, desc)


def on_a_terminal(*args) -> str:
    """What msprof prints on stdout when stdout is a terminal (a pseudo-terminal here)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "msprof", *map(str, args)], stdout=slave,
                            stderr=subprocess.DEVNULL, env=dict(ENV, COLUMNS="300"))
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:               # (Linux: EIO once the other side is closed)
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return out.decode("utf-8", "replace")


# --- names ---------------------------------------------------------------------------------------------------
def test_bidi_and_invisible_characters_in_names_are_escaped_on_a_terminal(tmp_path, msprof_cli):
    """U+202E (right-to-left override) would show "conv\u202ecod.exe" as "convexe.doc"; zero-width and other
    format characters hide text. On a terminal they are escaped as JSON would write them; into a pipe the
    bytes are the data's."""
    name = "c\u202eexe\u200b\u2066x\u2069"
    job = named_job(tmp_path, name)
    for fmt in ("table", "csv", "json"):
        shown = on_a_terminal("show", "-dir", job, "--table", "op_statistic", "--format", fmt)
        assert "c\\u202eexe\\u200b\\u2066x\\u2069" in shown, fmt
        assert not {"\u202e", "\u200b", "\u2066", "\u2069"} & set(shown), fmt
    piped = msprof_cli("show", "-dir", job, "--table", "op_statistic", "--format", "csv")
    assert piped.returncode == 0 and name in piped.stdout


# --- what stands where msprof writes ---------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["sqlite/msprof.db", "summary/acl_statistic_0_1_3.csv",
                                   "timeline/acl_0.tiny.1.1.json"])
def test_a_directory_where_an_output_file_belongs_is_exit_7(tmp_path, msprof_cli, where):
    """It was exit 1 ("internal error: IsADirectoryError"). Now exit 7 naming it, nothing written through or
    into it, and the other results of the run are as they were."""
    job = jobgen.write_job(tmp_path, small_job())
    command = ["export", "timeline"] if where.startswith("timeline") else ["export", "summary"]
    if not where.startswith("sqlite"):
        assert msprof_cli(*command, "-dir", job).returncode == 0
        (job / where).unlink()
    (job / where).mkdir(parents=True)
    (job / where / "mine").write_text("kept\n")
    before = {p: p.read_bytes() for p in job.rglob("*") if p.is_file() and p.parent.name in ("summary", "timeline")}
    proc = msprof_cli(*command, "-dir", job)
    no_traceback(proc)
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr.splitlines()[-1] == (f"msprof: error: {job / where} is a directory where msprof writes a "
                                            "file (remove it, or write the results elsewhere with --output DIR)")
    assert (job / where / "mine").read_text() == "kept\n" and os.listdir(job / where) == ["mine"]
    assert {p: p.read_bytes() for p in before} == before
    assert not [p for p in job.rglob(".*")]                  # no temporary left


@pytest.mark.parametrize("layout", ["JOB", "PROF"])
def test_output_never_writes_through_a_link_below_it(tmp_path, msprof_cli, layout):
    """--output DIR may itself be a link (the user named it), but DIR/<result dir name> (and a PROF_'s
    DIR/PROF_x/device_N) are msprof's: a link there was followed. Now exit 7 naming it, nothing written."""
    from fixtures import indepgen

    if layout == "JOB":
        collection = jobgen.write_job(tmp_path / "in", small_job())
    else:
        collection = Path(indepgen.generate(tmp_path / "in", ["--seed", "3", "--ops", "5", "--iters", "2"]))
    elsewhere, real = tmp_path / "elsewhere", tmp_path / "real-output"
    elsewhere.mkdir()
    real.mkdir()
    output = tmp_path / "output"
    output.symlink_to(real, target_is_directory=True)          # --output itself: a link is fine
    link = output / collection.name if layout == "JOB" else output / collection.name / "device_0"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    for command in (["import"], ["export", "summary"], ["export", "timeline"], ["show"]):
        proc = msprof_cli(*command, "-dir", collection, "--output", output)
        no_traceback(proc)
        assert proc.returncode == 7, (command, proc.stderr)
        assert (f"msprof: error: {link} is a symbolic link: msprof does not write through links under --output "
                "(remove it, or choose another --output DIR)") in proc.stderr, proc.stderr
        assert list(elsewhere.iterdir()) == []
    link.unlink()
    proc = msprof_cli("export", "summary", "-dir", collection, "--output", output)
    assert proc.returncode == 0, proc.stderr
    assert list((real / collection.name).rglob("*.csv"))


# --- CSV injection -------------------------------------------------------------------------------------------
# (none needs quoting: SQLite prints a column none of whose names needs care as it is, unless it is one of these)
FORMULAS = ["=HYPERLINK(1)", "-2+3+cmd|calc!A0", "@SUM(1+1)", "+x", "\tx"]


def _csv_cells(path: Path) -> set:
    import csv

    with open(path, newline="", encoding="utf-8") as handle:
        return {cell for row in csv.reader(handle) for cell in row}


def test_names_a_spreadsheet_would_run_are_written_as_text(tmp_path, msprof_cli):
    """OWASP's CSV injection: a field beginning with =, +, -, @, a tab or a carriage return is a formula to a
    spreadsheet. Such a name is written with a single quote before it, in the files (JOB: printed by Python;
    PROF_: printed by SQLite, msprof.renderers.insql) and in show's csv; a name that is no more than a number
    ("-1.5", "-2e5") and every other name stay as they are."""
    from fixtures import profgen

    names = FORMULAS + ["-1.5", "-2e5", "conv"]
    desc = small_job()
    layers = desc["models"][0]["layers"]
    desc["models"][0]["layers"] = [dict(layers[0], id=i, name=name, ori="", task_id=10 + i,
                                        duration_us=[100 + i, 110 + i, 120 + i]) for i, name in enumerate(names)]
    job = jobgen.write_job(tmp_path / "job", desc)
    prof = profgen.write_prof(tmp_path / "prof", {"iterations": 2, "threads": [{"ops": [
        {"name": name, "type": "Conv2D", "dur_us": 20 + i} for i, name in enumerate(names)]}]})
    expected = {"'" + name for name in FORMULAS} | {"-1.5", "-2e5", "conv"}
    for collection, summary in ((job, job / "summary"), (prof, prof / "device_0" / "summary")):
        proc = msprof_cli("export", "summary", "-dir", collection)
        assert proc.returncode == 0, proc.stderr
        op_summary = sorted(summary.glob("op_summary*.csv"))[0]
        cells = _csv_cells(op_summary)
        assert expected <= cells, (op_summary, cells)
        assert not set(FORMULAS) & cells
        shown = msprof_cli("show", "-dir", collection, "--format", "csv", "--table", "op_statistic")
        assert shown.returncode == 0, shown.stderr
        assert not set(FORMULAS) & {cell for row in shown.stdout.splitlines() for cell in row.split(",")}
    # json is not a spreadsheet's: the names as they are
    assert msprof_cli("export", "summary", "-dir", prof, "--format", "json").returncode == 0
    rows = json.loads((prof / "device_0" / "summary" / "op_summary.json").read_text(encoding="utf-8"))
    assert set(FORMULAS) <= {row["Op Name"] for row in rows}


def test_sqlite_and_python_write_a_text_field_alike():
    """The two csv printers (Python's, and SQLite's for tables printed in SQL) agree on every kind of text:
    quoted, defused, both, neither; a spreadsheet reads each back as the text itself."""
    import csv
    import io
    import sqlite3

    from msprof.renderers.csvfile import CSV_FIELDS, column_texts
    from msprof.tables import Column

    values = FORMULAS + ['=a,"b"', "\r=x", "-", "+", "-1.5", "-1,3,224,224", "1e-5", "a,b", 'say "hi"', "", "x\ny",
                         "N/A", "café", "=", "@"]
    conn = sqlite3.connect(":memory:")
    by_sql = [conn.execute(f"SELECT {CSV_FIELDS.text_sql(':v')}", {"v": v}).fetchone()[0] for v in values]
    by_python = column_texts(Column("Name"), values)
    assert by_sql == by_python
    read = next(csv.reader(io.StringIO(",".join(by_python) + "\n")))
    assert [field[1:] if field != value else field for field, value in zip(read, values)] == values
    assert [v for v, field in zip(values, read) if field != v] == FORMULAS + ['=a,"b"', "\r=x", "=", "@"]


# --- databases ---------------------------------------------------------------------------------------------------
def plant_endless_task_view(db: Path) -> None:
    """What a sender can put in a database: ``task`` as a view over an endless recursive query (a statement
    that never returns), modified in place (the file keeps its identity)."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        columns = ", ".join(f"t.{row[1]}" for row in conn.execute("PRAGMA table_info(task)"))
        conn.execute("ALTER TABLE task RENAME TO task_kept")
        conn.execute(f"CREATE VIEW task AS WITH RECURSIVE r(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM r) "
                     f"SELECT {columns} FROM task_kept t, r WHERE r.n < 0")


def test_a_database_msprof_did_not_build_here_is_not_believed(tmp_path, msprof_cli):
    """A collection shipped with sqlite/msprof.db: the sender's bookkeeping says it is current (sizes, times and
    hashes of the raw files are the sender's), and its task table is a view that never returns (show spun at
    100 % CPU forever). It is not believed: rebuilt from the raw data, said, and the tables are the raw data's.
    A copy of a database this user built is not believed either; the same file renamed still is."""
    job = jobgen.write_job(tmp_path / "job", small_job())
    expected = msprof_cli("show", "-dir", job, "--format", "json")
    assert expected.returncode == 0, expected.stderr
    elsewhere = dict(XDG_CACHE_HOME=str(tmp_path / "sender-cache"))          # the sender's machine: its own key
    assert msprof_cli("import", "-dir", job, env=elsewhere).returncode == 0
    plant_endless_task_view(job / "sqlite" / "msprof.db")
    shown = msprof_cli("show", "-dir", job, "--format", "json", timeout=60)
    no_traceback(shown)
    assert shown.returncode == 0, shown.stderr
    assert (f"{job.name}: importing (database not made by msprof here for this user, or changed since: not "
            "believed)") in shown.stderr
    assert json.loads(shown.stdout)[job.name]["tables"] == json.loads(expected.stdout)[job.name]["tables"]
    again = msprof_cli("export", "summary", "-dir", job, timeout=60)
    assert again.returncode == 0 and "importing" not in again.stderr       # the rebuilt one is believed
    (tmp_path / "copy").mkdir()
    subprocess.run(["cp", "-a", str(job), str(tmp_path / "copy")], check=True)
    copied = msprof_cli("show", "-dir", tmp_path / "copy" / job.name)
    assert "importing (database not made by msprof here" in copied.stderr
    moved = tmp_path / "moved"
    job.rename(moved)
    assert "importing" not in msprof_cli("show", "-dir", moved).stderr


def test_the_key_is_the_users_alone(tmp_path, msprof_cli):
    """The key is made 0600 in the user's cache directory; one that others may read is not used (said)."""
    cache = tmp_path / "cache"
    job = jobgen.write_job(tmp_path / "job", small_job())
    assert msprof_cli("import", "-dir", job, env=dict(XDG_CACHE_HOME=str(cache))).returncode == 0
    key = cache / "msprof" / "key"
    assert key.stat().st_mode & 0o777 == 0o600 and key.stat().st_size == 32
    assert "importing" not in msprof_cli("query", "-dir", job, env=dict(XDG_CACHE_HOME=str(cache))).stderr
    key.chmod(0o644)
    proc = msprof_cli("query", "-dir", job, env=dict(XDG_CACHE_HOME=str(cache)))
    assert proc.returncode == 0, proc.stderr
    assert (f"warning: {key}: not used (others may read or change it: mode 0644): msprof's databases are rebuilt "
            "by every command until it is removed") in proc.stderr
    assert "importing (database not made by msprof here" in proc.stderr


# --- bookkeeping files --------------------------------------------------------------------------------------------
def _limited_memory():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))     # (a runaway read fails, not the machine)


@pytest.mark.parametrize("manifest", ["summary.csv.manifest", "timeline.manifest", "summary.csv.list"])
@pytest.mark.parametrize("planted", ["link to /dev/zero", "fifo", "huge", "names a file", "forged"])
def test_a_planted_list_of_written_files_is_never_believed(tmp_path, manifest, planted):
    """sqlite/summary.<fmt>.manifest (and timeline.manifest) say which files the last export wrote, for the
    next to replace. A collection can ship its own: a link to /dev/zero at summary.csv.list (as earlier
    versions named it) was read until memory ran out, a FIFO hung, and any file it named in summary/ was
    deleted. Now a link or anything but a regular file is never opened, nor more than 1 MiB read (said, and
    taken as absent); only a list msprof signed here for this user is believed, and then only for files that
    still are what msprof wrote; summary.<fmt>.list is not read at all."""
    job = jobgen.write_job(tmp_path, small_job())
    command = ["export", "summary"] if manifest.startswith("summary") else ["export", "timeline"]
    directory = job / ("summary" if command[1] == "summary" else "timeline")
    run = dict(env=ENV, capture_output=True, text=True, timeout=60, preexec_fn=_limited_memory)
    subprocess.run([sys.executable, "-m", "msprof", "-q", *command, "-dir", job], check=True, **run)
    notes = directory / "my_notes.txt"
    notes.write_text("mine\n")
    path = job / "sqlite" / manifest
    read = manifest.endswith(".manifest")
    assert path.is_file() == read
    path.unlink(missing_ok=True)
    if planted == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif planted == "fifo":
        os.mkfifo(path)
    elif planted == "huge":
        path.write_text("my_notes.txt\n" * 100_000)
    elif planted == "names a file":
        path.write_text("my_notes.txt\n")           # (what earlier versions wrote: names, one a line)
    else:
        path.write_text(json.dumps({"about": {}, "files": {"my_notes.txt": [0, 0, 5, 0]}, "signature": "0" * 64}))
    proc = subprocess.run([sys.executable, "-m", "msprof", *command, "-dir", job], **run)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert notes.read_text() == "mine\n"
    said = {"link to /dev/zero": f"warning: {path}: not read (a symbolic link)",
            "fifo": f"warning: {path}: not read (not a regular file)",
            "huge": f"warning: {path}: not read (over 1048576 bytes)"}
    if read and planted in said:
        assert said[planted] in proc.stderr, proc.stderr
    else:
        assert "warning" not in proc.stderr, proc.stderr
    if read:
        assert path.is_file() and not path.is_symlink()               # replaced by msprof's own
    again = subprocess.run([sys.executable, "-m", "msprof", *command, "-dir", job], **run)
    assert again.returncode == 0 and "warning" not in again.stderr, again.stderr
    assert notes.read_text() == "mine\n"


def test_a_log_that_is_a_fifo_is_not_waited_for(tmp_path, msprof_cli):
    """log/msprof.log shipped as a FIFO: opening it for writing waited for a reader, forever (found by
    bench/fuzz.py). It is opened without waiting, and refused as not a regular file."""
    job = jobgen.write_job(tmp_path, small_job())
    (job / "log").mkdir()
    os.mkfifo(job / "log" / "msprof.log")
    proc = msprof_cli("export", "summary", "-dir", job, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"warning: not writing the log {job / 'log' / 'msprof.log'}: not a regular file" in proc.stderr
