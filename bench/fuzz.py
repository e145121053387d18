#!/usr/bin/env python3
"""Hostile-collection fuzz (not a test: tests/test_fuzz.py runs it at a small size): what a collection can
ship or a busy machine can do to msprof, at random, checked for what must never happen — a traceback, a hang,
an "internal error" (exit 1), a file outside the collection touched.

    python bench/fuzz.py                        # 200 trials, every family
    python bench/fuzz.py --trials 2000 --seed 7 --family raw --family signal
    python bench/fuzz.py --keep /tmp/fuzz       # keep each failing trial's collection there

Each trial copies a pristine collection (a small JOB, or a small PROF_ with its host and device), imported
or not, damages it in one way of one family, and runs msprof's commands on it:

* ``bookkeeping`` — what msprof keeps beside its results, planted: the manifests (sqlite/summary.<fmt>.manifest,
  timeline.manifest, and earlier versions' summary.csv.list) and the databases and their parts as links to /dev/zero or out of the collection, FIFOs,
  directories, random or huge (sparse) files, lists naming a file outside or a victim beside them, a database
  from another machine (another key) whose task table never ends, log/msprof.log as a FIFO or a link;
* ``special`` — FIFOs, directories, sockets and links where raw files or output files belong;
* ``raw`` — every raw file's name in turn: cut short, random bytes, flipped bytes, zeros, empty;
* ``signal`` — SIGINT, TERM or HUP at a random moment of an import or an export (exit 130 or done; the
  earlier outputs never half replaced).

Every command runs with a memory limit (a runaway read fails, not the machine) and a timeout (a hang).
The user's own files, one outside the collection (``victim``) and one in each summary/ and timeline/
(``my_notes.csv``), must stay as they were. Prints one line per family and the
failures with what reproduces them; exit 1 when any.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FAMILIES = ("bookkeeping", "special", "raw", "signal")
COMMANDS = (["import"], ["export", "summary"], ["export", "timeline"], ["show"], ["query"],
            ["export", "summary", "--format", "json"])
# exit codes a hostile collection may earn (cli.md): anything else — 1 above all — is a failure
ALLOWED = {0, 2, 6, 7, 8, 130}
MEMORY = 3 << 30
# seconds from the start within which a signal may still find the interpreter without msprof's handlers
STARTING = 0.5
VICTIM_TEXT = "a file of the user's, outside the collection\n"


# --- pristine collections ----------------------------------------------------------------------------------
def pristine(work: Path) -> dict:
    """The collections trials start from: a JOB and a PROF_, each raw and imported."""
    from fixtures import indepgen
    from fixtures.board import jobgen
    from fixtures.networks import small_job

    made = {}
    for kind in ("job", "prof"):
        raw = work / "pristine" / kind / "raw"
        if not raw.exists():
            if kind == "job":
                jobgen.write_job(raw, small_job())
            else:
                indepgen.generate(raw, ["--seed", "3", "--ops", "6", "--iters", "2"])
        [collection] = [p for p in raw.iterdir() if p.is_dir()]
        imported = work / "pristine" / kind / "imported"
        if not imported.exists():
            shutil.copytree(raw, imported, symlinks=True)
            run(["export", "summary"], imported / collection.name, timeout=120)
            run(["export", "timeline"], imported / collection.name, timeout=120)
        made[kind] = (raw / collection.name, imported / collection.name)
    return made


def result_dirs(collection: Path) -> list:
    """Where a collection's raw data and outputs are: a JOB, or a PROF_'s host/ and device_N/."""
    inner = [p for p in collection.iterdir() if p.is_dir() and (p.name == "host" or p.name.startswith("device_"))]
    return inner or [collection]


def raw_files(collection: Path) -> list:
    return sorted(p for d in result_dirs(collection) if (d / "data").is_dir() for p in (d / "data").iterdir())


# --- running msprof ------------------------------------------------------------------------------------------
def _limits():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run(command, collection: Path, timeout: float, env=None):
    """msprof ``command`` on ``collection``: (exit code or "hang", stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", **(env or {}))
    try:
        proc = subprocess.run([sys.executable, "-m", "msprof", *command, "-dir", str(collection)], env=env,
                              capture_output=True, text=True, timeout=timeout, preexec_fn=_limits,
                              errors="replace")
    except subprocess.TimeoutExpired:
        return "hang", ""
    return proc.returncode, proc.stderr + proc.stdout


def problem(code, output: str):
    """What is wrong with a command's end, or None."""
    if code == "hang":
        return "hang"
    if "Traceback" in output:
        return "traceback"
    if "internal error" in output or code not in ALLOWED:
        return f"exit {code}"
    return None


# --- the families ---------------------------------------------------------------------------------------------
def _clear(path: Path) -> None:
    """Nothing at ``path`` any more; its directory there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)


def _special(path: Path, rng: random.Random, outside: Path) -> str:
    """Replace ``path`` by a special file of a random kind; say which."""
    _clear(path)
    kind = rng.choice(["fifo", "dir", "socket", "link-zero", "link-out", "link-loop"])
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
        (path / "inside").write_text("x")
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as sock:
            try:
                sock.bind(str(path))
            except OSError:              # (a path too long for a socket): a FIFO instead
                os.mkfifo(path)
                kind = "fifo"
    elif kind == "link-zero":
        path.symlink_to("/dev/zero")
    elif kind == "link-out":
        path.symlink_to(outside)
    else:
        path.symlink_to(path.name)
    return kind


def bookkeeping(collection: Path, rng: random.Random, outside: Path) -> str:
    unit = rng.choice(result_dirs(collection))
    names = ["sqlite/summary.csv.manifest", "sqlite/summary.json.manifest", "sqlite/timeline.manifest",
             "sqlite/summary.csv.list", "sqlite/msprof.db",
             "log/msprof.log"] + [f"sqlite/{p.name}" for p in (unit / "sqlite").glob("msprof.*.*.db")]
    name = rng.choice(names)
    path = unit / name
    how = rng.choice(["special", "random", "huge", "names outside", "forged", "foreign database"])
    if how == "foreign database" and name.endswith(".db"):
        return f"{name}: {_foreign_database(collection, unit, rng)}"
    if how == "special" or how == "foreign database":
        return f"{name}: {_special(path, rng, outside)}"
    _clear(path)
    if how == "random":
        path.write_bytes(rng.randbytes(rng.randrange(1, 5000)))
    elif how == "huge":
        with open(path, "wb") as handle:
            handle.truncate(2 << 30)                   # sparse: 2 GB that take no space
    elif how == "names outside":
        path.write_text("".join(f"{n}\n" for n in (str(outside), "../../victim", "../log/msprof.log", "my_notes.csv")))
    else:
        files = {n: [0, 0, 1, 0] for n in (str(outside), "../victim", "my_notes.csv")}
        path.write_text(json.dumps({"about": {}, "files": files, "signature": rng.randbytes(32).hex()}))
    return f"{name}: {how}"


def _foreign_database(collection: Path, unit: Path, rng: random.Random) -> str:
    """The unit's database as another machine (another key) would ship it, its task table endless."""
    import sqlite3

    cache = collection.parent / "other-machine"
    code, _ = run(["import"], collection, timeout=120, env=dict(XDG_CACHE_HOME=str(cache)))
    db = unit / "sqlite" / "msprof.db"
    if code != 0 or not db.is_file():
        return "a foreign database (not made)"
    with sqlite3.connect(db) as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'task' AND type = 'table'").fetchone():
            columns = ", ".join(f"t.{row[1]}" for row in conn.execute("PRAGMA table_info(task)"))
            conn.execute("ALTER TABLE task RENAME TO task_kept")
            conn.execute(f"CREATE VIEW task AS WITH RECURSIVE r(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM r) "
                         f"SELECT {columns} FROM task_kept t, r WHERE r.n < 0")
    return "a foreign database whose task table never ends"


def special(collection: Path, rng: random.Random, outside: Path) -> str:
    unit = rng.choice(result_dirs(collection))
    outputs = [p for sub in ("summary", "timeline") if (unit / sub).is_dir() for p in (unit / sub).iterdir()]
    path = rng.choice(raw_files(collection) + outputs) if rng.random() < 0.8 or not outputs else rng.choice(outputs)
    return f"{path.relative_to(collection)}: {_special(path, rng, outside)}"


def raw(collection: Path, rng: random.Random, outside: Path) -> str:
    path = rng.choice(raw_files(collection))
    data = bytearray(path.read_bytes()) if path.is_file() else bytearray()
    how = rng.choice(["cut", "random", "flipped", "zeros", "empty", "cut and flipped"])
    if how in ("cut", "cut and flipped") and data:
        del data[rng.randrange(len(data)):]
    if how in ("flipped", "cut and flipped"):
        for _ in range(rng.randint(1, 50)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
    if how == "random":
        data = bytearray(rng.randbytes(rng.randrange(1, 20000)))
    elif how == "zeros":
        data = bytearray(rng.choice([64, 128, 4096, 65536]))
    elif how == "empty":
        data = bytearray()
    path.write_bytes(bytes(data))
    return f"{path.relative_to(collection)}: {how}"


MUTATIONS = {"bookkeeping": bookkeeping, "special": special, "raw": raw}


def signalled(collection: Path, rng: random.Random, timeout: float):
    """A command interrupted at a random moment: (what, problem or None, the end of what it said)."""
    command = rng.choice([["import"], ["export", "summary"], ["export", "timeline"], ["show"]])
    sig = rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
    delay = rng.uniform(0.0, 1.5)
    what = f"{' '.join(command)}: {sig.name} after {delay:.2f} s"
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "msprof", *command, "-dir", str(collection)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_limits)
    time.sleep(delay)
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return what, "hang after the signal", ""
    if delay < STARTING and (proc.returncode == -sig or "KeyboardInterrupt" in err and "msprof" not in err):
        return what, None, ""           # (before msprof's handlers: docs/security.md "Not promised")
    found = problem(proc.returncode, err)
    if found is None and proc.returncode == 130 and err.strip().splitlines()[-1:] not in ([], ["msprof: interrupted"]):
        found = f"not one line: {err[-300:]!r}"     # (nothing at all: the start, before the command line was read)
    leftovers = [p for d in result_dirs(collection) for sub in ("sqlite", "summary", "timeline")
                 if (d / sub).is_dir() for p in (d / sub).iterdir() if p.name.startswith(".")]
    if found is None and leftovers:
        found = f"temporaries left: {[p.name for p in leftovers]}"
    return what, found, err[-600:]


# --- trials ------------------------------------------------------------------------------------------------------
def trial(number: int, family: str, seed: int, collections: dict, work: Path, timeout: float):
    """One trial: (what was done, [(command, problem, output tail)])."""
    rng = random.Random(f"{seed}-{number}")
    kind = rng.choice(sorted(collections))
    source = collections[kind][rng.random() < 0.7]       # mostly imported: the bookkeeping is there
    place = work / f"trial-{number}"
    shutil.rmtree(place, ignore_errors=True)
    place.mkdir(parents=True)
    collection = place / source.name
    shutil.copytree(source, collection, symlinks=True)
    victim = place / "victim"
    victim.write_text(VICTIM_TEXT)
    failures = []
    if family != "signal":
        what = f"{kind}: {MUTATIONS[family](collection, rng, victim)}"
    # (the user's notes beside the results: after the mutation, which may replace what it finds there)
    victims = [victim] + [d / sub / "my_notes.csv" for d in result_dirs(collection) for sub in ("summary", "timeline")
                          if not (d / sub).is_symlink()]
    for path in victims[1:]:
        path.parent.mkdir(exist_ok=True)
        path.write_text(VICTIM_TEXT)
    if family == "signal":
        what, found, tail = signalled(collection, rng, timeout)
        if found:
            failures.append(("signal", found, tail))
        what = f"{kind}: {what}"
    for command in rng.sample(COMMANDS, k=3):
        code, output = run(command, collection, timeout)
        found = problem(code, output)
        if found:
            failures.append((" ".join(command), found, output[-600:]))
    for path in victims:
        if not path.is_file() or path.is_symlink() or path.read_text() != VICTIM_TEXT:
            failures.append(("-", f"a file of the user's was changed or removed: {path.relative_to(place)}", ""))
    return what, failures, place


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--family", action="append", choices=FAMILIES, help="only these (repeatable)")
    parser.add_argument("--work", type=Path, help="where collections are copied (default: a temporary)")
    parser.add_argument("--keep", type=Path, help="copy each failing trial's collection here")
    parser.add_argument("--timeout", type=float, default=60, help="seconds a command may take (then: a hang)")
    args = parser.parse_args(argv)
    families = args.family or list(FAMILIES)
    import tempfile

    work = args.work or Path(tempfile.mkdtemp(prefix="msprof-fuzz-"))
    collections = pristine(work)
    counts = {family: [0, 0] for family in families}
    failed = []
    started = time.monotonic()
    for number in range(args.trials):
        family = families[number % len(families)]
        what, failures, place = trial(number, family, args.seed, collections, work, args.timeout)
        counts[family][0] += 1
        if failures:
            counts[family][1] += 1
            failed.append((number, family, what, failures))
            if args.keep:            # (cp: FIFOs and sockets too)
                args.keep.mkdir(parents=True, exist_ok=True)
                subprocess.run(["cp", "-a", str(place), str(args.keep)], check=False)
        shutil.rmtree(place, ignore_errors=True)
    print(f"{args.trials} trial(s) in {time.monotonic() - started:.0f} s, seed {args.seed}")
    for family, (done, bad) in counts.items():
        print(f"  {family:12} {done:5} trial(s), {bad} failed")
    for number, family, what, failures in failed:
        print(f"\ntrial {number} ({family}; --seed {args.seed}): {what}")
        for command, found, tail in failures:
            print(f"  {command}: {found}")
            if tail:
                print("    " + tail.strip().replace("\n", "\n    "))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
