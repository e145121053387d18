"""The progress line (a terminal only: a real pty here), the hints the export commands and the demo end
with, and the bundled PROF_ sample (`msprof demo --prof`)."""
import csv
import json
import os
import pty
import select
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "msprof" / "demo_data"
sys.path.insert(0, str(ROOT))

from fixtures import make_demo  # noqa: E402


def run_on_pty(args, cwd, env=None, timeout=120):
    """Run msprof with stderr (and stdin) on a new pseudo-terminal and stdout on a pipe; return
    (exit code, stdout text, every byte written to the terminal)."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", "COLUMNS": "100", **(env or {})}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "msprof", *map(str, args)], cwd=cwd, env=env,
                            stdin=slave, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 1 << 16)
            except OSError:                 # EIO: the child closed its end
                break
            if not data:
                break
            screen += data
        elif proc.poll() is not None:
            break
    os.close(master)
    stdout = proc.stdout.read().decode()
    proc.stdout.close()
    return proc.wait(timeout=30), stdout, screen


@pytest.fixture
def demo_job(tmp_path):
    job = next(p for p in DEMO.iterdir() if p.name.startswith("JOB"))
    target = tmp_path / job.name
    shutil.copytree(job, target)
    return target


# ------------------------------------------------------------------------------------------ progress
def test_progress_line_on_a_terminal(demo_job, tmp_path):
    code, _, screen = run_on_pty(["export", "summary", "-dir", demo_job], tmp_path,
                                 env={"MSPROF_PROGRESS_DELAY": "0"})
    assert code == 0, screen
    # drawn: a carriage return, the step and its bar, the rest of the line erased ...
    assert b"\rimporting" in screen and b"\rwriting summaries [" in screen and b"\x1b[K" in screen
    # ... and erased before a message: every message starts at the beginning of a clean line
    assert b"\r\x1b[Kwrote 5 file(s) in " in screen
    last = screen.rstrip(b"\r\n").rsplit(b"\n", 1)[-1]
    assert b"[" not in last and last.startswith(b"      msprof advise -dir ")


@pytest.mark.parametrize("case", ["pipe", "quiet", "dumb terminal", "short command"])
def test_no_progress_line_where_nobody_watches(case, demo_job, tmp_path, msprof_cli):
    """Never into a pipe, a CI log, with -q or TERM=dumb; and a command shorter than the delay (1 s by
    default; 30 s here, so that a loaded machine cannot make the command longer) stays quiet even on a
    terminal."""
    args = ["export", "summary", "-dir", demo_job]
    if case == "pipe":
        proc = msprof_cli(*args, env={"MSPROF_PROGRESS_DELAY": "0", "TERM": "xterm"})
        code, screen = proc.returncode, proc.stderr.encode()
        assert b"wrote 5 file(s)" in screen
    else:
        env = {"MSPROF_PROGRESS_DELAY": "0" if case != "short command" else "30"}
        if case == "dumb terminal":
            env["TERM"] = "dumb"
        code, _, screen = run_on_pty(["-q", *args] if case == "quiet" else args, tmp_path, env=env)
        assert screen == b"" if case == "quiet" else b"wrote 5 file(s)" in screen
    assert code == 0
    assert b"\r" not in screen.replace(b"\r\n", b"\n") and b"\x1b" not in screen and b"[#" not in screen


# ------------------------------------------------------------------------------------------ end hints
def hints(stderr: str) -> dict:
    lines = [line.strip() for line in stderr.splitlines()]
    return {"view": [l for l in lines if l.startswith("view: open ")],
            "show": [shlex.split(l.split("next:", 1)[1].split("   (")[0]) for l in lines if l.startswith("next:")],
            "advise": [shlex.split(l.split("   (")[0]) for l in lines if l.startswith("msprof advise")]}


@pytest.mark.parametrize("kind", ["JOB", "PROF_"])
def test_export_ends_with_what_to_do_next_quoted_for_a_shell(kind, tmp_path, msprof_cli):
    """Under a directory whose name a shell would split or expand (and that SQLite URIs would cut at "#"
    or "?"): the commands work, and the hints, pasted, name that directory."""
    odd = tmp_path / "my runs (v2) #1 ?*"
    sample = next(p for p in DEMO.iterdir() if p.name.startswith(kind))
    result = odd / sample.name
    shutil.copytree(sample, result)
    proc = msprof_cli("export", "summary", "-dir", result, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    said = hints(proc.stderr)
    assert said["show"] == [["msprof", "show", "-dir", str(result)]]
    assert said["advise"] == [["msprof", "advise", "-dir", str(result)]]
    proc = msprof_cli("export", "timeline", "-dir", result, cwd=tmp_path)
    [view] = hints(proc.stderr)["view"]
    if kind == "JOB":
        timelines = sorted((result / "timeline").glob("task_time_*.json"))
        more = " (and the 1 other file(s) beside it)"
    else:
        timelines, more = [result / "device_0" / "timeline" / "msprof.json"], ""
    assert view == (f"view: open {shlex.quote(str(timelines[0]))}{more} in "
                    "https://ui.perfetto.dev or chrome://tracing")
    quiet = msprof_cli("-q", "export", "summary", "-dir", result)
    assert quiet.returncode == 0 and quiet.stderr == ""
    shown = msprof_cli("show", "-dir", result, "--format", "json")
    assert shown.returncode == 0 and json.loads(shown.stdout)


# ------------------------------------------------------------------------------------------ demo --prof
def test_demo_prof_runs_the_bundled_prof_sample(tmp_path, msprof_cli):
    proc = msprof_cli("demo", "--prof", "--output", tmp_path / "demo", cwd=tmp_path, env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    [prof] = (tmp_path / "demo").glob("PROF_*")
    assert prof.name == make_demo.PROF_NAME
    device = prof / "device_0"
    assert sorted(p.name for p in (device / "summary").iterdir()) == [
        "api_statistic.csv", "op_statistic.csv", "op_summary.csv", "task_time.csv"]
    assert (device / "timeline" / "msprof.json").is_file()
    # the description's numbers: Conv2D ops per iteration × 3 iterations, their summed durations
    desc = make_demo.prof_description()
    convs = [op["dur_us"] for op in desc["threads"][0]["ops"] if op["type"] == "Conv2D"]
    with open(device / "summary" / "op_statistic.csv", newline="") as handle:
        row = next(r for r in csv.DictReader(handle) if r["OP Type"] == "Conv2D")
    assert (row["Count"], row["Total Time(us)"], row["Avg Time(us)"]) == (
        str(len(convs) * desc["iterations"]), f"{sum(convs) * desc['iterations']:.1f}",
        f"{sum(convs) / len(convs):.1f}")
    assert "Op statistic (device 0)" in proc.stdout and "API statistic (host)" in proc.stdout
    said = hints(proc.stderr)
    assert said["show"] == [["msprof", "show", "-dir", str(prof)]]
    assert said["view"] == [f"view: open {device / 'timeline' / 'msprof.json'} in https://ui.perfetto.dev "
                            "or chrome://tracing"]
    advise = msprof_cli("advise", "-dir", prof, "--format", "json")
    ids = [f["id"] for f in json.loads(advise.stdout)["findings"]]
    assert {"decomposed_activation", "cpu_fallback"} <= set(ids)


def test_prof_import_counts_the_bytes_its_workers_decode(tmp_path, monkeypatch):
    """A PROF_ directory's host and device are imported by two worker processes: the line counted the
    databases (0 % for seconds, then 50 %) though the user guide says import counts bytes (issue 38 #4). The
    workers now pass on the bytes they decode: at the end the parent's line has counted every byte of the raw
    data files (their sizes, read here), and stands at its total."""
    from fixtures import indepgen
    from msprof import api, progress, workers

    if not workers.several_cores():
        pytest.skip("one core: the databases are imported one after the other in this process (no workers)")
    prof = Path(indepgen.generate(tmp_path, ["--seed", "2", "--ops", "30", "--iters", "3"]))
    seen = []
    wait = progress.wait

    def watched(futures, shown, weights=None, relay=None):
        wait(futures, shown, weights, relay)
        seen.append((shown.label, shown.total, shown.done, relay.value if relay is not None else None))

    monkeypatch.setattr(progress, "wait", watched)
    api.import_collection(prof)
    raw = sum(f.stat().st_size for d in prof.glob("*/data") for f in d.iterdir())
    [(label, total, done, decoded)] = seen
    assert label == "importing 2 databases" and decoded == raw and done == total >= raw


@pytest.mark.parametrize("kind", ["JOB", "PROF_"])
def test_the_timeline_line_counts_every_event_and_ends_at_100(kind, tmp_path):
    """export timeline's line counted the tasks of a timeline against a total of every event (tasks, host
    calls, flows): a PROF_ timeline ended at 20 % (issue 38 #4). Each timeline's last drawn state is 100 %."""
    import re

    sample = next(p for p in DEMO.iterdir() if p.name.startswith(kind))
    target = shutil.copytree(sample, tmp_path / sample.name)
    assert run_on_pty(["import", "-dir", target], tmp_path)[0] == 0
    code, _, screen = run_on_pty(["export", "timeline", "-dir", target], tmp_path, env={"MSPROF_PROGRESS_DELAY": "0"})
    assert code == 0, screen
    last = {}
    for name, pct in re.findall(rb"\rwriting (\S+) \[[#.]+\] +(\d+)%", screen):
        last[name] = int(pct)
    assert last and set(last.values()) == {100}, last


def test_the_line_says_100_only_of_work_done():
    """The percentage was rounded (99.6 % of the bytes imported read "100%" under a bar one mark short of
    full); it is rounded down now, as the bar is, and says 100 only at the end."""
    from msprof.progress import BAR, Step

    step = Step("importing", 1000, "bytes")
    for done, marks, pct in ((0, 0, "  0%"), (996, BAR - 1, " 99%"), (1000, BAR, "100%")):
        step.done = done
        line = step.text(step.started)
        assert line == f"importing [{'#' * marks}{'.' * (BAR - marks)}] {pct}  0 s", line
