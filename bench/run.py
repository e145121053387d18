#!/usr/bin/env python3
"""Scale benchmark (not a test): generate JOBs and PROF_ directories of N tasks and time msprof on them as
whole processes.

    python bench/run.py                      # JOBs of 10k, 100k, 1M tasks; PROF_ of 100k, 250k, 1M tasks
    python bench/run.py --sizes 2000 --quick # the CI smoke size (no PROF_ series, no reference)
    python bench/run.py --sizes "" --prof-sizes 1000000 --no-reference   # one PROF_ size only
    python bench/run.py --no-reference       # skip the reference-analyser comparison

For each size it prints wall time, records/s, peak RSS (of that command alone, from wait4) and output
sizes for import, export summary, export timeline and show, then how time grows with size, then the
targets judged at the largest size. Generated data is cached in bench/out/ (generating 1M tasks takes
about half a minute for a PROF_, a couple of minutes for a JOB; each in its own process, whose time and
peak RSS are printed). When ../shared/reference exists it also times the reference analyser's import +
export summary on the PROF_ data of --reference-tasks tasks against msprof's, and prints the ratio.
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
sys.path.insert(0, str(ROOT / "bench"))
import shapes  # noqa: E402
from shapes import INDEP_SHAPES, PROF_SHAPES, job_description  # noqa: E402,F401  (tests import it from here)

DEFAULT_PROF_SIZES = "100000,250000,1000000"
PROF_SHAPE = "static"       # --prof-shape


def prof_shape_text() -> str:
    return shapes.text(PROF_SHAPE)


def prof_description(tasks: int) -> dict:
    return shapes.prof_description(tasks, PROF_SHAPE)


def prof_marker(tasks: int) -> str:
    return shapes.marker(tasks, PROF_SHAPE)


# what msprof writes into a result directory (a JOB, or a PROF_'s host/ and device_N/)
OUTPUT_DIRS = ("sqlite", "summary", "timeline", "log", "query")
# bytes per raw record, by file name prefix (lower case); slices of a stream are counted as one byte stream
RECORD_BYTES = {
    "job": {"hwts": 64, "aacore": 128, "aclmodule": 128, "ts_track": 40},
    # (host files: either aging or unaging)
    "prof": {"hwts.data.": 64, "stars_soc.data.": 64, "aicore.data.": 128, "ffts_profile.data.": 128,
             "api_event.data.": 40,
             "compact.node_basic_info.": 64, "compact.task_track.": 64, "additional.graph_id_map.": 256},
}


def data_dir(kind: str, tasks: int, out: Path) -> Path:
    return out / (f"{kind}-{tasks}" if kind == "job" or PROF_SHAPE == "static" else f"{kind}-{PROF_SHAPE}-{tasks}")


def cached(kind: str, tasks: int, out: Path):
    """The generated JOB or PROF_ directory of that size, if complete; else None."""
    parent = data_dir(kind, tasks, out)
    found = sorted(parent.glob("JOB*" if kind == "job" else "PROF_*")) if parent.is_dir() else []
    if not found:
        return None
    if kind == "job":
        marker = found[0] / "data" / ".complete-bench"   # where caches written by earlier versions have it
        return found[0] if marker.exists() else None
    # the marker holds the description, so a changed description regenerates the data
    marker = parent / ".complete-bench"
    return found[0] if marker.exists() and marker.read_text() == prof_marker(tasks) else None


def generate_here(kind: str, tasks: int, out: Path) -> None:
    """The --generate mode: write the data of that size, then its marker (only a finished one is used)."""
    parent = data_dir(kind, tasks, out)
    shutil.rmtree(parent, ignore_errors=True)
    parent.mkdir(parents=True)
    if kind == "job":
        from fixtures.board import jobgen

        job = jobgen.write_job(parent, job_description(tasks))
        (job / "data" / ".complete-bench").write_text("")
    elif PROF_SHAPE in INDEP_SHAPES:
        from fixtures import indepgen

        indepgen.generate(parent, shapes.indep_arguments(tasks, PROF_SHAPE))
        (parent / ".complete-bench").write_text(prof_marker(tasks))
    else:
        from fixtures import families, profgen

        desc = prof_description(tasks)
        if "families" in desc:
            families.write(parent, desc)
        else:
            profgen.write_prof(parent, desc)
        (parent / ".complete-bench").write_text(prof_marker(tasks))


def generate(kind: str, tasks: int, out: Path) -> Path:
    """The cached data of that size, generated first if needed. Generation runs in its own process, so this
    one stays small (the generators hold everything in memory: about 2 GB for a 1M-task PROF_) and the
    generator's time and peak RSS can be reported."""
    found = cached(kind, tasks, out)
    if found:
        return found
    wall, rss, code = run_measured([sys.executable, Path(__file__).resolve(), "--generate", kind, str(tasks),
                                    "--out", out.resolve(), "--prof-shape", PROF_SHAPE])
    found = cached(kind, tasks, out)
    if code or not found:
        raise SystemExit(f"generating the {kind} of {tasks:,} tasks failed")
    print(f"  generated {found.name} ({tasks:,} tasks) in {wall:.1f} s, peak RSS {rss:.0f} MB", flush=True)
    return found


# Every measured command is started by a small helper process (``--spawner``), never by this one. On Linux
# exec records the old address space's high-water RSS into the new program's maxrss, and a child forked or
# vforked from this process starts in (a copy of) our address space: when this process generated 1M tasks
# itself, wait4 reported its ~1.2 GB peak for every step. The spawner is a fresh, small interpreter (exec
# gives it a new address space even when this process is already large), so the peaks wait4 reports are
# the command's own.
_spawner = None


def spawner_main() -> int:
    """The spawner's loop: one JSON request per line on stdin, one JSON answer per line on stdout."""
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(run_here(request["args"], request.get("cwd"), request.get("env"))), flush=True)
    return 0


def run_here(args, cwd=None, env=None) -> dict:
    # Dirty pages left by the previous step (hundreds of MB at 1M tasks) are flushed first, untimed:
    # otherwise their write-back lands in the middle of the next step's measurement.
    os.sync()
    # stderr goes to a file, not a pipe: a command writing more than a pipe holds would block until waited for
    with tempfile.TemporaryFile() as err:
        started = time.monotonic()
        # stdin is not inherited: it is the spawner's request stream
        proc = subprocess.Popen(args, cwd=cwd, env=dict(os.environ, **env) if env else None,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
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


def run_measured(args, cwd=None, env=None):
    """Run one command through the spawner (``env``: variables to add); return (wall s, peak RSS MB of that
    command alone, exit code)."""
    start_spawner()
    request = {"args": [str(a) for a in args], "cwd": str(cwd) if cwd else None, "env": env}
    _spawner.stdin.write(json.dumps(request) + "\n")
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


def result_dirs(kind: str, target: Path) -> list:
    """The directories msprof reads and writes into: a JOB, or a PROF_'s host/ and device_N/."""
    if kind == "job":
        return [target]
    return sorted(p for p in target.iterdir() if p.is_dir() and (p.name == "host" or p.name.startswith("device_")))


def raw_records(kind: str, dirs) -> int:
    sizes = RECORD_BYTES[kind]
    stream_bytes = dict.fromkeys(sizes, 0)
    for directory in dirs:
        for path in (directory / "data").iterdir():
            name = path.name.lower()
            name = name.split(".", 1)[1] if name.startswith(("aging.", "unaging.")) else name
            for prefix in sizes:
                if name.startswith(prefix):
                    stream_bytes[prefix] += path.stat().st_size
    return sum(stream_bytes[prefix] // size for prefix, size in sizes.items())


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


def bench_steps(kind: str, tasks: int, out: Path, repeat: int = 1) -> dict:
    """Run the four steps on the JOB or PROF_ ``repeat`` times in turn; each step reports its median wall
    time, the range, and the largest peak RSS of its runs."""
    target = generate(kind, tasks, out)
    dirs = result_dirs(kind, target)
    for directory in dirs:     # every step starts from raw data and writes its files anew
        for sub in OUTPUT_DIRS:
            shutil.rmtree(directory / sub, ignore_errors=True)
    msprof = [sys.executable, "-m", "msprof", "-q"]
    records = raw_records(kind, dirs)
    steps = [("import", ["import"], "sqlite"), ("export summary", ["export", "summary"], "summary"),
             ("export timeline", ["export", "timeline"], "timeline"), ("show", ["show", "--top", "20"], None)]
    runs = {label: [] for label, _, _ in steps}
    for _ in range(repeat):
        for label, command, _ in steps:
            runs[label].append(run_measured(msprof + command + ["-dir", str(target)]))
    rows = []
    for label, _, outdir in steps:
        walls = sorted(r[0] for r in runs[label])
        wall = walls[len(walls) // 2]
        rows.append({"step": label, "wall": wall, "walls": walls, "rss": max(r[1] for r in runs[label]),
                     "code": max(r[2] for r in runs[label]),
                     "rate": records / wall if label == "import" else tasks / wall,
                     "out": sum(dir_size(d / outdir) for d in dirs) if outdir else 0})
    timelines = sorted((p for d in dirs for p in (d / "timeline").glob("*.json")), key=lambda p: p.name)
    return {"tasks": tasks, "records": records, "raw_bytes": sum(dir_size(d / "data") for d in dirs),
            "rows": rows, "timelines": [p.name for p in timelines], "timeline_files": timelines}


def bench_job(tasks: int, out: Path, repeat: int = 1) -> dict:
    return bench_steps("job", tasks, out, repeat)


def bench_prof(tasks: int, out: Path, repeat: int = 1) -> dict:
    return bench_steps("prof", tasks, out, repeat)


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
    if result["timeline_files"]:
        name, size = largest_timeline(result)
        print(f"  largest timeline file: {name} {size / 1e6:.1f} MB")


def largest_timeline(result: dict):
    """(name, bytes) of the result's largest timeline file."""
    path = max(result["timeline_files"], key=lambda p: p.stat().st_size)
    return path.name, path.stat().st_size


def pipeline_wall(result: dict) -> float:
    return sum(r["wall"] for r in result["rows"] if r["step"] != "show")


def peak_rss(result: dict) -> float:
    return max(r["rss"] for r in result["rows"])


VERDICT = {True: "met", False: "NOT MET"}


def print_targets(results) -> None:
    """The targets of design.md / issue 5, judged on the largest size run."""
    largest = max(results, key=lambda r: r["tasks"])
    if largest["tasks"] < 1_000_000:
        print("\n(the targets of design.md are judged at 1,000,000 tasks: --sizes 1000000)")
        return
    rate = next(r["rate"] for r in largest["rows"] if r["step"] == "import")
    peak = max(peak_rss(result) for result in results)
    print(f"\nTargets at {largest['tasks']:,} tasks (median of the runs):")
    print(f"  import >= 1M records/s end to end          {rate / 1e6:6.2f}M records/s  {VERDICT[rate >= 1e6]}")
    print(f"  import + summary + timeline <= 20 s        {pipeline_wall(largest):6.2f} s          "
          f"{VERDICT[pipeline_wall(largest) <= 20]}")
    print(f"  peak RSS <= 500 MB at every size           {peak:6.0f} MB         {VERDICT[peak <= 500]}")
    sliced = [p for p in largest["timeline_files"] if "_slice_" in p.name]
    from msprof.tracecheck import check_trace

    valid = sum(1 for p in sliced if not check_trace(p))   # untimed, after the runs
    print(f"  timelines above 1M events in slices        {len(sliced)} slice file(s), {valid} valid "
          f"(tracecheck)  {VERDICT[bool(sliced) and valid == len(sliced)]}")


# "flat" peak RSS: the largest size's peak within this factor of the smallest size's (memory that grew with
# the data would be ~10x from 100k to 1M tasks)
FLAT_RSS = 1.5


def print_prof_targets(results) -> None:
    """The PROF_ targets, judged on the largest size run."""
    largest = max(results, key=lambda r: r["tasks"])
    if largest["tasks"] < 1_000_000:
        print("\n(the PROF_ targets are judged at 1,000,000 tasks: --prof-sizes 100000,250000,1000000)")
        return
    smallest = min(results, key=lambda r: r["tasks"])
    peak = max(peak_rss(result) for result in results)
    wall = pipeline_wall(largest)
    print(f"\nPROF_ targets at {largest['tasks']:,} tasks (median of the runs):")
    print(f"  {'import + summary + timeline <= 20 s':43}{wall:6.2f} s          {VERDICT[wall <= 20]}")
    print(f"  {'peak RSS <= 500 MB at every size':43}{peak:6.0f} MB         {VERDICT[peak <= 500]}")
    per_size = ", ".join(f"{r['tasks']:,}: {peak_rss(r):.0f} MB" for r in sorted(results, key=lambda r: r["tasks"]))
    if smallest is largest:
        print(f"  {'peak RSS flat across sizes':43}(one size run: {per_size})")
    else:
        flat = peak_rss(largest) <= FLAT_RSS * peak_rss(smallest)
        print(f"  {f'peak RSS flat (largest <= {FLAT_RSS}x smallest)':43}{per_size}  {VERDICT[flat]}")
    name, size = largest_timeline(largest) if largest["timeline_files"] else ("none written", 0)
    print(f"  {'no timeline file over 200 MB':43}{size / 1e6:6.1f} MB ({name})  "
          f"{VERDICT[bool(largest['timeline_files']) and size <= 200e6]}")


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
    """The reference analyser vs msprof on the same PROF_ data (import + export summary): the series' data
    when the size matches, each tool on its own fresh copy of the raw data (both write into it)."""
    reference = Path(os.environ.get("MSPROF_REFERENCE_DIR", ROOT.parent / "shared" / "reference"))
    script = reference / "analysis" / "msprof" / "msprof.py"
    if not script.is_file():
        print(f"\nreference comparison skipped: {script} not found")
        return
    prof = generate("prof", tasks, out)
    work = out / f"reference-{PROF_SHAPE}-{tasks}"
    shutil.rmtree(work, ignore_errors=True)
    for copy in ("ref", "ours"):
        shutil.copytree(prof, work / copy / prof.name, ignore=shutil.ignore_patterns(*OUTPUT_DIRS))
    times = {}
    # the reference runs as tests/reference_runner.py runs it: writing no __pycache__ into its read-only tree
    for tool, copy, program, env in (("reference", "ref", [script], {"PYTHONDONTWRITEBYTECODE": "1"}),
                                     ("msprof", "ours", ["-m", "msprof", "-q"], None)):
        times[tool] = 0.0
        for command in (["import"], ["export", "summary"]):
            wall, _, code = run_measured([sys.executable, *program, *command, "-dir", work / copy / prof.name],
                                         env=env)
            times[tool] += wall
            if code:
                print(f"{tool} failed on the PROF_ data; ratio not available")
                return
    ratio = times["reference"] / times["msprof"]
    print(f"\nReference analyser vs msprof on PROF_ data ({tasks:,} tasks; {prof_shape_text()}), "
          f"import + export summary:")
    print(f"  reference {times['reference']:.2f} s, msprof {times['msprof']:.2f} s, "
          f"ratio reference/msprof = {ratio:.1f}x")
    # the same work only when both wrote the same rows: the reference multiplies reused task ids (docs/prof.md
    # difference 5), which a per-launch run of more than 65536 launches a stream has
    rows = {copy: sum(sum(1 for _ in f.open(encoding="utf-8", errors="replace")) - 1
                      for f in (work / copy).rglob("op_summary*.csv")) for copy in ("ref", "ours")}
    print(f"  op_summary rows: reference {rows['ref']:,}, msprof {rows['ours']:,}"
          + ("" if rows["ref"] == rows["ours"] else "  (not the same work: see docs/prof.md difference 5)"))
    if tasks == 250_000:
        print(f"  reference takes >= 20x as long as msprof   {ratio:6.1f}x          {VERDICT[ratio >= 20]}")
    else:
        print("  (the >= 20x target is judged at 250,000 tasks: --reference-tasks 250000)")


def sizes(text: str) -> list:
    return [int(s) for s in text.split(",") if s.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help='comma list of JOB task counts ("": none)')
    parser.add_argument("--prof-sizes", default=None,
                        help=f'comma list of PROF_ task counts ("": none; default {DEFAULT_PROF_SIZES}, '
                             'none with --quick)')
    parser.add_argument("--out", default=str(ROOT / "bench" / "out"), help="where generated data is cached")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--reference-tasks", type=int, default=250_000,
                        help="PROF_ tasks of the reference comparison")
    parser.add_argument("--quick", action="store_true",
                        help="smoke mode: no reference comparison, no PROF_ series unless --prof-sizes is given")
    parser.add_argument("--repeat", type=int, default=1, help="runs per step (the median is reported)")
    parser.add_argument("--prof-shape", choices=sorted(PROF_SHAPES) + sorted(INDEP_SHAPES), default="static",
                        help="how the PROF_ data's host launches its ops (series and reference comparison)")
    parser.add_argument("--spawner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--generate", nargs=2, metavar=("KIND", "TASKS"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    global PROF_SHAPE
    PROF_SHAPE = options.prof_shape
    if options.spawner:
        return spawner_main()
    if options.generate:
        generate_here(options.generate[0], int(options.generate[1]), Path(options.out))
        return 0
    start_spawner()
    try:
        return bench(options)
    finally:
        stop_spawner()


def run_series(bench_one, task_sizes, out: Path, repeat: int, print_judged) -> bool:
    """One series (JOB or PROF_): each size measured and printed, then the scaling and the targets judged
    by ``print_judged``; True when a step failed."""
    results = []
    for tasks in task_sizes:
        results.append(bench_one(tasks, out, repeat))
        print_result(results[-1])
    if results:
        print_scaling(results)
        print_judged(results)
    return any(r["code"] for result in results for r in result["rows"])


def bench(options) -> int:
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    repeat = max(1, options.repeat)
    prof_sizes = options.prof_sizes
    if prof_sizes is None:
        prof_sizes = "" if options.quick else DEFAULT_PROF_SIZES
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; "
          f"calibration workload {calibration():.2f} s (see docs/performance.md)")
    failed = run_series(bench_job, sizes(options.sizes), out, repeat, print_targets)
    if sizes(prof_sizes):
        print(f"\nPROF_ series: {prof_shape_text()}")
    failed |= run_series(bench_prof, sizes(prof_sizes), out, repeat, print_prof_targets)
    print(f"\ncalibration workload at the end: {calibration():.2f} s")
    if not (options.no_reference or options.quick):
        reference_ratio(options.reference_tasks, out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
