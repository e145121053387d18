"""Reliability and security of what msprof writes (docs/security.md), through the real CLI on real files:
links and wrong file types in a collection, names that would inject log lines, leftovers of killed
processes, a full disk, permissions, read-only collections, a broken pipe."""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures import indepgen
from fixtures.board import jobgen
from fixtures.networks import small_job

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def job(tmp_path):
    return jobgen.write_job(tmp_path, small_job())


def no_traceback(proc):
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


# --- links and names in a collection -----------------------------------------------------------------------
def test_a_log_link_is_never_followed_and_names_cannot_inject_lines(job, tmp_path, msprof_cli):
    """A collection received as a tarball: log/msprof.log links to authorized_keys, and a data file's name
    holds a newline and a key. The linked file stays as it was; the log, once real, has one line per
    message, the name escaped."""
    keys = tmp_path / "authorized_keys"
    keys.write_text("ssh-ed25519 AAAAownkey me@here\n")
    (job / "log").mkdir()
    (job / "log" / "msprof.log").symlink_to(keys)
    evil = "x\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI attacker\n"
    (job / "data" / evil).write_bytes(b"not a raw file")
    proc = msprof_cli("-v", "import", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert keys.read_text() == "ssh-ed25519 AAAAownkey me@here\n"
    assert "not writing the log" in proc.stderr and "symbolic link" in proc.stderr
    # stderr is one line per message too: the name is escaped there as well
    assert not [line for line in proc.stderr.splitlines() if line.startswith("ssh-ed25519")]
    (job / "log" / "msprof.log").unlink()
    proc = msprof_cli("-v", "import", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    lines = (job / "log" / "msprof.log").read_text(encoding="utf-8").splitlines()
    assert lines and all(line[:2] == "20" for line in lines)        # each line starts with its timestamp
    assert any("x\\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI attacker\\n" in line for line in lines)


@pytest.mark.parametrize("name", ["sqlite", "summary", "timeline", "log"])
@pytest.mark.parametrize("what", ["link", "file"])
def test_output_dirs_that_are_links_or_files_are_refused(job, tmp_path, msprof_cli, name, what):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = job / name
    if what == "link":
        path.symlink_to(elsewhere, target_is_directory=True)
    else:
        path.write_text("not a directory")
    proc = msprof_cli("export", "summary", "-dir", job) if name != "timeline" else \
        msprof_cli("export", "timeline", "-dir", job)
    no_traceback(proc)
    assert list(elsewhere.iterdir()) == []                  # nothing written through the link
    if name == "log":                                       # no log: the results are still written
        assert proc.returncode == 0 and "not writing the log" in proc.stderr
        return
    assert proc.returncode == 7, proc.stderr
    assert str(path) in proc.stderr and ("symbolic link" in proc.stderr or "not a directory" in proc.stderr)
    if what == "file":
        assert path.read_text() == "not a directory"


@pytest.mark.parametrize("raw", [b"bad\x1b[31mname", b"bad\xffname"])
def test_odd_bytes_in_a_directory_name_are_escaped(tmp_path, msprof_cli, raw):
    """A terminal escape, or bytes that are not UTF-8 (no logging traceback), in a directory name."""
    parent = tmp_path / os.fsdecode(raw)
    jobgen.write_job(parent, small_job())
    proc = msprof_cli("import", cwd=parent)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert "Logging error" not in proc.stderr and "\x1b[" not in proc.stderr
    assert ("\\x1b[31mname" if b"\x1b" in raw else "bad\\xffname") in proc.stderr


# --- signals, workers, leftovers ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def big_job(tmp_path_factory):
    """A JOB large enough that its import, export summary and export timeline take a while in workers."""
    sys.path.insert(0, str(ROOT / "bench"))
    from run import job_description

    return jobgen.write_job(tmp_path_factory.mktemp("big"), dict(job_description(60_000), slice_bytes=1 << 22))


# Run msprof as a real process whose large steps always use worker processes (the thresholds are lowered
# in that process only).
WITH_WORKERS = ("import sys, msprof.parts, msprof.summary, msprof.trace;"
                "msprof.parts.PARALLEL_MIN_BYTES = 0; msprof.summary.PARALLEL_MIN_ROWS = 0;"
                "msprof.trace.PARALLEL_MIN_EVENTS = 0;"
                "from msprof.__main__ import main; main(sys.argv[1:])")


def children(pid: int):
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def leftovers(job: Path):
    return sorted(p.name for sub in ("sqlite", "summary", "timeline") if (job / sub).is_dir()
                  for p in (job / sub).iterdir() if p.name.startswith("."))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find the worker processes")
@pytest.mark.parametrize("command", [["import"], ["export", "summary"], ["export", "timeline"]])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_signal_to_msprof_stops_its_workers_and_leftovers_go(big_job, command, sig):
    if command != ["import"]:
        subprocess.run([sys.executable, "-m", "msprof", "-q", "import", "-dir", str(big_job)], check=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", WITH_WORKERS, *command, "-dir", str(big_job)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    workers = []
    while not workers and proc.poll() is None and time.monotonic() < deadline:
        workers = children(proc.pid)
        time.sleep(0.005)
    assert workers, "msprof started no worker process"
    time.sleep(0.05)                                  # the workers are busy now
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 130, err
        assert "interrupted" in err and "Traceback" not in err
        assert err.endswith("msprof: interrupted\n") and "" not in err.splitlines(), err     # one line
    gone = time.monotonic() + 5
    while any(running(w) for w in workers) and time.monotonic() < gone:
        time.sleep(0.05)
    assert not [w for w in workers if running(w)], "a worker outlived msprof"
    if sig != signal.SIGKILL:
        assert leftovers(big_job) == []                # cleaned up on the way out
    again = subprocess.run([sys.executable, "-m", "msprof", "-q", *command, "-dir", str(big_job)], env=env,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert leftovers(big_job) == []                    # a later run removes what a killed one left


@pytest.fixture(scope="module")
def big_prof(tmp_path_factory):
    """A per-launch PROF_ directory whose host and device are imported side by side by two workers."""
    return Path(indepgen.generate(tmp_path_factory.mktemp("bigprof"), [
        "--seed", "3", "--models", "1", "--ops", "500", "--iters", "120", "--mode", "launch"]))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find the worker processes")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_prof_import_interrupted_leaves_no_temporary_database(big_prof, sig):
    """The workers that build a PROF_ host and device database are killed with the import; the parent removes
    what they were writing before it exits (security.md: "what was being written is removed")."""
    sqlite_dirs = [big_prof / "host" / "sqlite", big_prof / "device_0" / "sqlite"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for attempt in range(5):          # until the signal lands while the workers write (not before, not after)
        for directory in sqlite_dirs:
            shutil.rmtree(directory, ignore_errors=True)
        proc = subprocess.Popen([sys.executable, "-m", "msprof", "import", "-dir", str(big_prof)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and not any(
                p.name.endswith(".tmp") for d in sqlite_dirs if d.is_dir() for p in d.iterdir()):
            time.sleep(0.005)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        if proc.returncode == 130:
            break
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.splitlines()[-1] == "msprof: interrupted" and "" not in err.splitlines(), err   # one line
    assert [p.name for d in sqlite_dirs if d.is_dir() for p in d.iterdir()] == []


def _threads_here() -> int:
    import threading
    return threading.active_count()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_linux_worker_runs_one_thread_so_its_own_pools_fork_safely():
    """A worker that forks a pool of its own (the PROF host import's association) must not have a second
    thread at the fork (a lock it held would stay held in the child; Python 3.12+ warns of it): on Linux the
    kernel watches the parent, not a thread."""
    from msprof import workers
    with workers.Pool(1) as pool:
        assert pool.submit(_threads_here).result(timeout=30) == 1


# --- a full disk ---------------------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmpfs):
    """A 4 MiB tmpfs (root only: mount), unmounted afterwards."""
    return tmpfs("size=4m")


def fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` up to ``leave`` free bytes; return the filler file."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(filler, "wb") as handle:
        handle.write(b"\0" * max(0, free - leave))
    return filler


@pytest.mark.parametrize("command,directory", [(["import"], "sqlite"), (["export", "summary"], "summary"),
                                               (["export", "timeline"], "timeline")])
def test_a_full_disk_names_the_file_leaves_nothing_and_frees_its_space(small_disk, msprof_cli, command, directory):
    job = jobgen.write_job(small_disk, small_job())
    if command != ["import"]:
        assert msprof_cli("import", "-dir", job).returncode == 0
    filler = fill(small_disk, 4096)
    proc = msprof_cli(*command, "-dir", job)
    no_traceback(proc)
    assert proc.returncode == 6, proc.stderr
    assert "not enough disk space" in proc.stderr and str(job / directory) in proc.stderr
    assert [p for p in job.rglob(".*")] == []                   # no temporary keeps the space it took
    filler.unlink()
    again = msprof_cli(*command, "-dir", job)
    assert again.returncode == 0, again.stderr


# --- a fresh collection --------------------------------------------------------------------------------------
def test_workers_start_after_the_database_directory_exists(tmp_path, monkeypatch):
    """Issue 10 #3: on a fresh JOB (no sqlite/ yet) the worker that loads PMU and ACL into a part database
    in sqlite/ used to start before sqlite/ was made, and failed whenever making the database was slow.
    Made slow on purpose here, with the worker forced on."""
    from msprof import api, parts, store
    from msprof.layouts.job import importer

    job = jobgen.write_job(tmp_path, small_job())
    assert not (job / "sqlite").exists()
    slow_mkdir = store.output_dir

    def slow(path):
        time.sleep(0.3)
        return slow_mkdir(path)

    monkeypatch.setattr(store, "output_dir", slow)
    monkeypatch.setattr(parts, "output_dir", slow)
    monkeypatch.setattr(parts, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(importer, "several_cores", lambda: True)
    [path] = api.import_collection(job)
    with contextlib.closing(store.open_readonly(path)) as conn:
        assert conn.execute("SELECT count(*) FROM pmu").fetchone()[0] > 0     # loaded by the worker
    assert sorted(p.name.split(".")[1] for p in (job / "sqlite").iterdir()) == ["acl", "db", "pmu"]


# --- permissions and read-only collections, as a real unprivileged user ---------------------------------------
@pytest.fixture
def user(system_user):
    """The suite's throw-away local user (tests/conftest.py): its pwd entry."""
    return system_user.entry


# This Python (pyenv's, under /root) is not one another user may run: the process starts as root, loads
# msprof and what it uses, then becomes the user for good — every file msprof then touches is the user's
# to read or write, or not.
AS_USER = """
import importlib, os, pkgutil, sys
import msprof
collect = os.environ.pop("AS_USER_COLLECT", None)        # (paramiko's import is slow: only when asked)
for module in pkgutil.walk_packages(msprof.__path__, "msprof."):
    if collect or not module.name.startswith("msprof.collect"):
        importlib.import_module(module.name)
for name in ("concurrent.futures.process", "multiprocessing.popen_fork", "multiprocessing.synchronize",
             "multiprocessing.queues", "decimal", "csv", "tempfile", "tabulate") + (
             ("click.shell_completion", "getpass", "encodings.utf_8_sig") if collect else ()):
    importlib.import_module(name)
from msprof import store
import sqlite3
store.sqlite_utils_database(sqlite3.connect(":memory:"))       # msprof imports it when it first builds
uid, gid, umask = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3], 8)
os.setgroups([]); os.setgid(gid); os.setuid(uid); os.umask(umask)
from msprof.__main__ import main
main(sys.argv[4:])
"""


def as_user(user, *args, umask="022", cwd=None, collect=False):
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "HOME": user.pw_dir, "NO_COLOR": "1",
           "LANG": "C.UTF-8", **({"AS_USER_COLLECT": "1"} if collect else {})}
    return subprocess.run([sys.executable, "-c", AS_USER, str(user.pw_uid), str(user.pw_gid), umask,
                           *map(str, args)], env=env, cwd=cwd or user.pw_dir, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def shared(tmp_path):
    """A directory every user can enter (pytest's tmp_path is private to root)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="msprof-shared-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def modes(root: Path):
    files = {oct(p.stat().st_mode & 0o777) for p in root.rglob("*") if p.is_file()
             and p.parent.name in ("sqlite", "summary", "timeline", "log")}
    dirs = {oct(p.stat().st_mode & 0o777) for p in root.rglob("*") if p.is_dir()
            and p.name in ("sqlite", "summary", "timeline", "log")}
    return files, dirs


@pytest.mark.parametrize("umask,files,dirs", [("022", "0o640", "0o750"), ("002", "0o640", "0o750"),
                                              ("077", "0o600", "0o700")])
def test_results_are_readable_by_the_group_and_no_wider(user, shared, umask, files, dirs):
    job = jobgen.write_job(shared, small_job())
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(shared)], check=True)
    proc = as_user(user, "show", "-dir", job, umask=umask)
    assert proc.returncode == 0, proc.stderr
    assert modes(job) == ({files}, {dirs})


def test_a_read_only_collection_says_so_and_output_writes_elsewhere(user, shared):
    job = jobgen.write_job(shared / "ro", small_job())
    for path in [shared / "ro", *((shared / "ro").rglob("*"))]:
        path.chmod(0o755 if path.is_dir() else 0o644)            # root's, readable by all, writable by none
    for command in (["import"], ["export", "summary"], ["export", "timeline"], ["show"]):
        proc = as_user(user, *command, "-dir", job)
        assert proc.returncode == 7, (command, proc.stderr)
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
        assert str(job) in proc.stderr and "--output" in proc.stderr
    out = Path(user.pw_dir) / "results"
    proc = as_user(user, "export", "summary", "-dir", job, "--output", out)
    assert proc.returncode == 0, proc.stderr
    assert len(list((out / job.name / "summary").glob("op_summary_*.csv"))) == 3
    assert (out / job.name / "sqlite" / "msprof.db").is_file() and not (job / "sqlite").exists()
    # fresh against the raw files: a second export reuses the database, a changed raw file rebuilds it
    proc = as_user(user, "export", "summary", "-dir", job, "--output", out)
    assert proc.returncode == 0 and "importing" not in proc.stderr
    demo = as_user(user, "demo", "--output", shared / "ro")
    assert demo.returncode == 7 and str(shared / "ro") in demo.stderr and "Traceback" not in demo.stderr


def test_show_of_an_imported_collection_made_read_only_prints_its_tables(user, shared):
    """show is a reading command: when the database is there and fresh, a collection nothing can be written in
    is shown (exit 0), with nothing said but that the log is not written."""
    job = jobgen.write_job(shared, small_job())
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(shared)], check=True)
    assert as_user(user, "import", "-dir", job).returncode == 0
    for path in [job, *job.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    proc = as_user(user, "show", "-dir", job, "--format", "csv", "--table", "op_statistic")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Task ID,Stream ID,OP Name,") and len(proc.stdout.splitlines()) > 1
    assert "timeline" not in proc.stderr and "cannot write" not in proc.stderr, proc.stderr     # (the log: said)
    assert not (job / "timeline").exists()


@pytest.mark.parametrize("layout", ["JOB", "PROF"])
@pytest.mark.parametrize("locked", ["raw file", "data dir"])
def test_a_raw_file_or_data_dir_the_user_may_not_read_is_exit_8_naming_it(user, shared, layout, locked):
    """Unreadable input is bad data named as such (exit 8, "cannot read"), not a refused write (which would
    send the user to --output for nothing) nor an internal error (the listing of data/)."""
    if layout == "JOB":
        unit = result = jobgen.write_job(shared / "ro", small_job())
    else:
        result = Path(indepgen.generate(shared / "ro", ["--seed", "3", "--ops", "5", "--iters", "2"]))
        unit = result / "device_0"
    raw = sorted(p for p in (unit / "data").iterdir() if p.stat().st_size > 0)[0]
    locked_path = raw if locked == "raw file" else unit / "data"
    for path in [shared / "ro", *((shared / "ro").rglob("*"))]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    out = Path(user.pw_dir) / "results"
    fresh = out / f"{layout}-{locked}".replace(" ", "-")
    # imported while it could be read, then the raw file's time moved (its content checked) and locked
    assert as_user(user, "import", "-dir", result, "--output", fresh).returncode == 0
    os.utime(raw, ns=(raw.stat().st_atime_ns, raw.stat().st_mtime_ns + 10 ** 9))
    locked_path.chmod(0o600 if locked == "raw file" else 0o700)            # root's alone
    proc = as_user(user, "query", "-dir", result, "--output", fresh)
    assert proc.returncode == 8 and f"{locked_path}: cannot read (Permission denied)" in proc.stderr, proc.stderr
    for command in (["import"], ["query"], ["show"]):
        proc = as_user(user, *command, "-dir", result, "--output", out)
        assert proc.returncode == 8, (command, proc.stderr)
        assert f"{locked_path}: cannot read (Permission denied)" in proc.stderr, (command, proc.stderr)
        assert "internal error" not in proc.stderr and "cannot write" not in proc.stderr
    # the failed imports under the fresh --output left no empty sqlite/ (found by a newcomer's trial)
    assert [p for p in out.rglob("sqlite") if not any(p.iterdir())] == []


@pytest.mark.parametrize("locked", ["device dir", "collection", "host dir", "host and device"])
def test_a_prof_directory_the_user_may_not_list_is_said_as_such(user, shared, locked):
    """A device directory (or the collection) the user may not list is "cannot read", exit 8 — not "no
    device_N directory" or "no info.json* found" (found by a newcomer's trial); the readable device is still
    reported."""
    prof_dir = Path(indepgen.generate(shared / "lk", ["--seed", "3", "--ops", "5", "--iters", "2", "--devices", "2"]))
    for path in [shared / "lk", *((shared / "lk").rglob("*"))]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    locked_path = {"device dir": prof_dir / "device_1", "collection": prof_dir, "host dir": prof_dir / "host",
                   "host and device": prof_dir / "device_0"}[locked]
    locked_path.chmod(0o700)                                                      # root's alone
    out = Path(user.pw_dir) / f"results-{locked.replace(' ', '-')}"
    if locked.startswith("host"):
        (prof_dir / "host").chmod(0o700)
        if locked == "host and device":
            (prof_dir / "device_1").chmod(0o700)
        # (a host the user may not read: said, and the devices reported without its data — it crashed: a
        # newcomer's trial; nothing readable at all: "cannot read", not "no collection here")
        proc = as_user(user, "export", "summary", "-dir", prof_dir, "--output", out)
        assert "internal" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        if locked == "host dir":
            assert proc.returncode == 0, proc.stderr
            assert (f"warning: {prof_dir / 'host'}: cannot read (Permission denied): the host's data are not read"
                    in proc.stderr)
            assert (out / prof_dir.name / "device_0" / "summary" / "op_summary.csv").is_file()
        else:
            assert proc.returncode == 8 and ": cannot read (Permission denied)" in proc.stderr, proc.stderr
        return
    proc = as_user(user, "export", "summary", "-dir", prof_dir, "--output", out)
    assert proc.returncode == 8, proc.stderr
    assert f"{locked_path}: cannot read (Permission denied)" in proc.stderr
    assert "no device_N" not in proc.stderr and "no info.json" not in proc.stderr and "internal" not in proc.stderr
    if locked == "device dir":
        assert (out / prof_dir.name / "device_0" / "summary" / "op_summary.csv").is_file()


@pytest.mark.parametrize("locked_mode", [0o755, 0o750])
def test_a_refused_write_names_what_refused_it_once(user, shared, locked_mode):
    """The directory that refused the write is named (not a temporary's or a planned file's name), the log
    warning is said once however often the command enters the result dir, and under --output the advice
    is another --output — also when the user may not even enter the directory (0750: was an internal
    error from the freshness check)."""
    job = jobgen.write_job(shared / "ro", small_job())
    proc = subprocess.run([sys.executable, "-m", "msprof", "-q", "export", "timeline", "-dir", job],
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr             # as root: timeline/ exists, owned by root
    for path in [shared / "ro", *((shared / "ro").rglob("*"))]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    proc = as_user(user, "export", "timeline", "-dir", job)
    assert proc.returncode == 7
    # (root's database is not believed by another user: it is rebuilt first, and sqlite/ refuses that)
    assert proc.stderr.splitlines()[-1] == (f"msprof: error: cannot write {job / 'sqlite'}: Permission denied"
                                            " (write the results elsewhere with --output DIR)")
    proc = as_user(user, "export", "summary", "-dir", job)         # imports first, then exports: two visits
    assert proc.returncode == 7 and proc.stderr.count("not writing the log") == 1, proc.stderr
    locked = shared / "locked"                                       # root's: the user cannot create in it
    locked.mkdir()
    locked.chmod(locked_mode)
    proc = as_user(user, "export", "summary", "-dir", job, "--output", locked / "mine")
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr.splitlines()[-1] == (f"msprof: error: cannot write {locked}: Permission denied"
                                            " (choose another --output DIR)")
    (job / "sqlite").chmod(0o700)                   # root's database, in a directory the user cannot enter
    proc = as_user(user, "query", "-dir", job)
    assert proc.returncode == 7 and "importing (database not readable (Permission denied))" in proc.stderr, (
        proc.stderr)


def test_collect_output_where_the_user_may_not_look_is_exit_7_before_connecting(user, shared):
    """collect --output under a directory the user may not enter: exit 7 naming it, before any connection (an
    earlier download's record was looked for first, and that raised: an internal error; found by a review)."""
    home = Path(user.pw_dir)
    project = home / "app"
    project.mkdir()
    (project / "main").write_text("#!/bin/sh\nexit 0\n")
    ini = home / "board.ini"
    ini.write_text("[ssh_config]\nip = 127.0.0.1\nport = 1\nusername = nobody\npwd = not-used\n")
    for path in (project, project / "main", ini):
        os.chown(path, user.pw_uid, user.pw_gid)
    ini.chmod(0o600)
    locked = shared / "locked"
    locked.mkdir(mode=0o700)                                             # root's alone
    proc = as_user(user, "collect", "-m", project / "main", "--config", ini, "--output", locked / "out",
                   collect=True)
    assert proc.returncode == 7, proc.stderr
    assert f"cannot write {locked}: Permission denied (choose another --output DIR)" in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr and "connect" not in proc.stderr


def test_a_collection_the_user_may_not_list_beside_readable_ones_is_said(user, shared):
    """A parent of two JOBs, one the user may not list: the other is reported, and the locked one is named
    (it was passed over without a word: found by a review)."""
    readable = jobgen.write_job(shared / "two" / "a", small_job())
    locked = jobgen.write_job(shared / "two" / "b", small_job())
    for path in [shared / "two", *((shared / "two").rglob("*"))]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (locked.parent).chmod(0o700)                                          # root's alone
    out = Path(user.pw_dir) / "results-two"
    proc = as_user(user, "export", "summary", "-dir", shared / "two", "--output", out)
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {locked.parent}: cannot read (Permission denied): not searched for collections" in proc.stderr
    assert list((out / readable.name / "summary").glob("op_summary_*"))
