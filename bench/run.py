#!/usr/bin/env python3
"""Scale benchmark (not a test): generate JOBs of N tasks and time msprof on them as whole processes.

    python bench/run.py                      # 10k, 100k and 1M tasks
    python bench/run.py --sizes 2000 --quick # the CI smoke size
    python bench/run.py --no-reference       # skip the reference-analyser comparison

For each size it prints wall time, records/s, peak RSS (of that child process alone, from wait4) and
output sizes for import, export summary, export timeline and show, then how time grows with size.
Generated JOBs are cached in bench/out/ (generation of 1M tasks takes a couple of minutes).
When ../shared/reference exists it also times the reference analyser's import + export summary on the
equivalent PROF data against msprof's, and prints the ratio.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LAYERS = 1000  # tasks per iteration; iterations = tasks / LAYERS


def job_description(tasks: int) -> dict:
    layers = min(LAYERS, tasks)
    executions = max(1, tasks // layers)
    return {
        "seed": f"bench-{tasks}",
        "slice_bytes": 64 << 20,  # like a board's slice files; records straddle slices
        "models": [{"name": "bench", "id": 1, "stream_id": 3, "executions": executions, "gap_us": 1,
                    "layers": [{"name": f"layer{i}", "type": ("Convolution", "Mish", "Pooling")[i % 3],
                                "task_id": i + 1, "duration_us": 5 + i % 11} for i in range(layers)]}],
        # ~1 ACL call per task, as an app calling single-op APIs would make
        "extra_acl_calls": [{"name": "svp_acl_op_execute", "api_type": 1, "duration_us": 2}] * (layers * executions),
    }


def generate(tasks: int, out: Path) -> Path:
    from fixtures.board import jobgen

    parent = out / f"job-{tasks}"
    existing = sorted(parent.glob("JOB*")) if parent.is_dir() else []
    if existing and (existing[0] / "data" / ".complete-bench").exists():
        return existing[0]
    shutil.rmtree(parent, ignore_errors=True)
    parent.mkdir(parents=True)
    started = time.monotonic()
    job = jobgen.write_job(parent, job_description(tasks))
    (job / "data" / ".complete-bench").write_text("")
    print(f"  generated {job.name} ({tasks} tasks) in {time.monotonic() - started:.1f} s", flush=True)
    return job


# Every measured command is started by a small helper process (``--spawner``), never by this one. On Linux
# exec records the old address space's high-water RSS into the new program's maxrss, and a child forked or
# vforked from this process starts in (a copy of) our address space: after generating 1M tasks here, wait4
# reported our ~1.2 GB peak for every step. The spawner is a fresh, small interpreter (exec gives it a new
# address space even when this process is already large), so the peaks wait4 reports are the command's own.
_spawner = None


def spawner_main() -> int:
    """The spawner's loop: one JSON request per line on stdin, one JSON answer per line on stdout."""
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(run_here(request["args"], request.get("cwd"))), flush=True)
    return 0


def run_here(args, cwd=None) -> dict:
    # Dirty pages left by the previous step (hundreds of MB at 1M tasks) are flushed first, untimed:
    # otherwise their write-back lands in the middle of the next step's measurement.
    os.sync()
    # stderr goes to a file, not a pipe: a command writing more than a pipe holds would block until waited for
    with tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(max(0, err.seek(0, os.SEEK_END) - 2000))
        tail = err.read().decode(errors="replace")
    # ru_maxrss is in KiB on Linux
    return {"wall": wall, "maxrss_mb": usage.ru_maxrss / 1024, "code": proc.returncode, "stderr_tail": tail}


def start_spawner() -> None:
    global _spawner
    if _spawner is not None and _spawner.poll() is None:
        return
    # The children import msprof and fixtures from this tree (PYTHONPATH), and run in ROOT because
    # ``python -m`` puts the working directory first on sys.path (another checkout's msprof must not win).
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    _spawner = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--spawner"], cwd=ROOT,
                                env=dict(os.environ, PYTHONPATH=path), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)


def stop_spawner() -> None:
    global _spawner
    if _spawner is not None:
        _spawner.stdin.close()      # end of its input: the spawner's loop ends
        _spawner.wait()
        _spawner.stdout.close()
        _spawner = None


def run_measured(args, cwd=None):
    """Run one command through the spawner; return (wall s, peak RSS MB of that command alone, exit code)."""
    start_spawner()
    _spawner.stdin.write(json.dumps({"args": [str(a) for a in args], "cwd": str(cwd) if cwd else None}) + "\n")
    _spawner.stdin.flush()
    answer = _spawner.stdout.readline()
    if not answer:
        raise RuntimeError("the bench's spawner process died")
    reply = json.loads(answer)
    if reply["code"] != 0:
        print(f"    FAILED ({reply['code']}): {' '.join(map(str, args))}\n{reply['stderr_tail']}")
    return reply["wall"], reply["maxrss_mb"], reply["code"]


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def raw_records(job: Path) -> int:
    sizes = {"hwts": 64, "aacore": 128, "aclmodule": 128, "ts_track": 40}
    total = 0
    for path in (job / "data").iterdir():
        for prefix, size in sizes.items():
            if path.name.lower().startswith(prefix):
                total += path.stat().st_size // size
    return total


def calibration() -> float:
    """Seconds for a fixed CPU-bound workload (Python + SQLite). This shared VM has slow phases (the same
    command takes up to ~1.5x as long); timing this before and after tells them from a slow msprof."""
    import sqlite3

    started = time.perf_counter()
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a, b)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", ((i, i * 7 % 1000) for i in range(300_000)))
    conn.execute("SELECT b, count(*), sum(a) FROM t GROUP BY b").fetchall()
    conn.close()
    sum(i * i for i in range(2_000_000))
    return time.perf_counter() - started


def bench_job(tasks: int, out: Path, repeat: int = 1) -> dict:
    """Run the four steps on the JOB ``repeat`` times in turn; each step reports its median wall time,
    the range, and the largest peak RSS of its runs."""
    job = generate(tasks, out)
    for sub in ("sqlite", "summary", "timeline", "log"):
        shutil.rmtree(job / sub, ignore_errors=True)
    msprof = [sys.executable, "-m", "msprof", "-q"]
    records = raw_records(job)
    steps = [("import", ["import"], "sqlite"), ("export summary", ["export", "summary"], "summary"),
             ("export timeline", ["export", "timeline"], "timeline"), ("show", ["show", "--top", "20"], None)]
    runs = {label: [] for label, _, _ in steps}
    for _ in range(repeat):
        for label, command, _ in steps:
            runs[label].append(run_measured(msprof + command + ["-dir", str(job)]))
    rows = []
    for label, _, outdir in steps:
        walls = sorted(r[0] for r in runs[label])
        wall = walls[len(walls) // 2]
        rows.append({"step": label, "wall": wall, "walls": walls, "rss": max(r[1] for r in runs[label]),
                     "code": max(r[2] for r in runs[label]),
                     "rate": records / wall if label == "import" else tasks / wall,
                     "out": dir_size(job / outdir) if outdir else 0})
    timelines = sorted(p.name for p in (job / "timeline").glob("*.json"))
    return {"tasks": tasks, "records": records, "raw_bytes": dir_size(job / "data"), "rows": rows,
            "timelines": timelines, "timeline_dir": job / "timeline"}


def print_result(result: dict) -> None:
    print(f"\n{result['tasks']:,} tasks: {result['records']:,} raw records, {result['raw_bytes'] / 1e6:.1f} MB raw")
    print(f"  {'step':16} {'wall s':>8} {'rate':>16} {'peak RSS MB':>12} {'output MB':>10}   runs (s)")
    for row in result["rows"]:
        unit = "records/s" if row["step"] == "import" else "tasks/s"
        status = "" if row["code"] == 0 else f"  (exit {row['code']})"
        spread = " ".join(f"{w:.2f}" for w in row["walls"]) if len(row["walls"]) > 1 else ""
        print(f"  {row['step']:16} {row['wall']:8.2f} {row['rate']:>10,.0f} {unit:9} {row['rss']:9.0f}"
              f" {row['out'] / 1e6:10.1f}   {spread}{status}")
    print(f"  import + export summary + export timeline: {pipeline_wall(result):.2f} s")
    print(f"  timeline files: {', '.join(result['timelines'])}")


def pipeline_wall(result: dict) -> float:
    return sum(r["wall"] for r in result["rows"] if r["step"] != "show")


def print_targets(results) -> None:
    """The targets of design.md / issue 5, judged on the largest size run."""
    largest = max(results, key=lambda r: r["tasks"])
    if largest["tasks"] < 1_000_000:
        print("\n(the targets of design.md are judged at 1,000,000 tasks: --sizes 1000000)")
        return
    rate = next(r["rate"] for r in largest["rows"] if r["step"] == "import")
    peak = max(r["rss"] for result in results for r in result["rows"])
    verdict = {True: "met", False: "NOT MET"}
    print(f"\nTargets at {largest['tasks']:,} tasks (median of the runs):")
    print(f"  import >= 1M records/s end to end          {rate / 1e6:6.2f}M records/s  {verdict[rate >= 1e6]}")
    print(f"  import + summary + timeline <= 20 s        {pipeline_wall(largest):6.2f} s          "
          f"{verdict[pipeline_wall(largest) <= 20]}")
    print(f"  peak RSS <= 500 MB at every size           {peak:6.0f} MB         {verdict[peak <= 500]}")
    sliced = [n for n in largest["timelines"] if "_slice_" in n]
    from msprof.tracecheck import check_trace

    valid = sum(1 for n in sliced if not check_trace(largest["timeline_dir"] / n))   # untimed, after the runs
    print(f"  timelines above 1M events in slices        {len(sliced)} slice file(s), {valid} valid "
          f"(tracecheck)  {verdict[bool(sliced) and valid == len(sliced)]}")


def print_scaling(results) -> None:
    if len(results) < 2:
        return
    print("\nScaling (µs per task; linear growth keeps these flat):")
    steps = [r["step"] for r in results[0]["rows"]]
    print("  " + f"{'tasks':>10} " + " ".join(f"{s:>16}" for s in steps))
    for result in results:
        print("  " + f"{result['tasks']:>10,} " + " ".join(
            f"{r['wall'] / result['tasks'] * 1e6:16.2f}" for r in result["rows"]))


def reference_ratio(tasks: int, out: Path) -> None:
    """The reference analyser vs msprof on the same PROF data (import + export summary)."""
    reference = Path(os.environ.get("MSPROF_REFERENCE_DIR", ROOT.parent / "shared" / "reference"))
    script = reference / "analysis" / "msprof" / "msprof.py"
    if not script.is_file():
        print(f"\nreference comparison skipped: {script} not found")
        return
    from fixtures import profgen

    work = out / f"prof-{tasks}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ops = [{"name": f"op{i}", "type": ("Conv2D", "Relu", "MatMul")[i % 3], "task_type": "AI_CORE",
            "block_dim": 8, "dur_us": 5 + i % 11} for i in range(100)]
    iterations = max(1, tasks // len(ops))
    prof = profgen.write_prof(work / "gen", {"iterations": iterations, "threads": [{"ops": ops}]})
    for copy in ("ref", "ours"):
        shutil.copytree(prof, work / copy / prof.name)
    env_note = f"{iterations * len(ops):,} tasks"
    ref_time = 0.0
    for command in (["import"], ["export", "summary"]):
        wall, _, code = run_measured([sys.executable, str(script), *command, "-dir", str(work / "ref" / prof.name)])
        ref_time += wall
        if code:
            print("reference run failed; ratio not available")
            return
    ours = 0.0
    for command in (["import"], ["export", "summary"]):
        wall, _, code = run_measured([sys.executable, "-m", "msprof", "-q", *command, "-dir",
                                      str(work / "ours" / prof.name)])
        ours += wall
        if code:
            print("msprof failed on the PROF data; ratio not available")
            return
    print(f"\nReference analyser vs msprof on PROF data ({env_note}), import + export summary:")
    print(f"  reference {ref_time:.2f} s, msprof {ours:.2f} s, ratio reference/msprof = {ref_time / ours:.1f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma list of task counts")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out"), help="where generated data is cached")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--reference-tasks", type=int, default=20000)
    parser.add_argument("--quick", action="store_true", help="smoke mode: no reference comparison")
    parser.add_argument("--repeat", type=int, default=1, help="runs per step (the median is reported)")
    parser.add_argument("--spawner", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.spawner:
        return spawner_main()
    start_spawner()
    try:
        return bench(options)
    finally:
        stop_spawner()


def bench(options) -> int:
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; "
          f"calibration workload {calibration():.2f} s (see docs/performance.md)")
    results = []
    failed = False
    for tasks in [int(s) for s in options.sizes.split(",")]:
        result = bench_job(tasks, out, max(1, options.repeat))
        print_result(result)
        failed |= any(r["code"] for r in result["rows"])
        results.append(result)
    print_scaling(results)
    print_targets(results)
    print(f"\ncalibration workload at the end: {calibration():.2f} s")
    if not (options.no_reference or options.quick):
        reference_ratio(options.reference_tasks, out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
