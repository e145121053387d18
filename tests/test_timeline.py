"""export timeline (outputs.md §2): exact times, naming, args, flows, slicing, overlaps, freshness.

Expected ts/dur are computed by hand from raw-format.md §3 for a hand-made JOB (``make_job``):
hwts 100 MHz, dev_start cntvct 1000 at host ns 5_000_000_000, collection start (start_info
clockMonotonicRaw) at 4_999_000_000 ns, so a device counter S is at ts = (S - 1000) / 100 + 1000 µs
and a host ns value H at ts = (H - 4_999_000_000) / 1000 µs.
"""
import json
import os
import struct
from fractions import Fraction
from pathlib import Path

import pytest

import msprof.events as ev
import msprof.layouts.job.trace as jt
import msprof.trace as tl
from msprof import workers
from msprof.api import import_collection
from msprof.contract import Selection
from msprof.errors import UsageError
from msprof.layouts import find_units
from msprof.tracecheck import check_trace


def open_report(job):
    [unit] = find_units(job)
    return unit.open()

HWTS = struct.Struct("=BBHHHQ12I")
STEP = struct.Struct("=BBHIQQQHHHH")
ACL = struct.Struct("=HHIQQII64s4Q")
HOST_MONO = 5_000_000_000
COLLECTION_MONO = 4_999_000_000
BEGIN_US = 1_700_000_000_000_000
PID, TID = 77, 78


def host_ns(syscnt: int) -> int:
    """Host ns of a device counter value (the sync logs of make_job)."""
    return (syscnt - 1000) * 10 + HOST_MONO


def make_job(parent, tasks, iterations, calls, layers=None, name="JOBT") -> Path:
    """A JOB written byte by byte from raw-format.md §5.

    tasks: (stream, task_id, task_type, start, end) syscnt, None = that HWTS record is missing;
    iterations: (index, start, end) syscnt of model 1; calls: (api_type, start_ns, end_ns, pid, tid, name)."""
    job = Path(parent) / name
    data = job / "data"
    data.mkdir(parents=True)
    (job / "info.json.0").write_text(json.dumps({
        "devices": "0", "platform_version": "svp", "pid": PID, "CPU": [{"Frequency": ""}],
        "DeviceInfo": [{"hwts_frequency": "100", "aic_frequency": "1000", "ai_core_num": 1}]}) + "\n")
    (job / "sample.json").write_text(json.dumps({"ai_core_metrics": "ArithmeticUtilization", "interval": 0,
                                                 "ai_core_profiling_events": "0x300,0x301"}))
    (job / "start_info.0").write_text(json.dumps({"collectionTimeBegin": str(BEGIN_US),
                                                   "clockMonotonicRaw": str(COLLECTION_MONO)}))
    (job / "dev_start.log.0").write_text(f"cntvct: 1000\nclock_monotonic_raw: {HOST_MONO}\n")
    (job / "host_start.log.0").write_text(f"[Host]\nclock_monotonic_raw: {HOST_MONO}\ncntvct: 1000\n")
    (data / "net.1.net.info").write_text("model_name: net\nmodel_id: 1\nbatch_num: 2\ninput_pic_num: 4\n"
                                         "layer_num: 2\n")
    rows = layers if layers is not None else [(0, 1, 3, "Convolution", "conv1", "conv1;bn1"),
                                              (1, 2, 3, "Mish", "mish\x01one", "")]
    (data / "net.1.layer.info").write_text("layer_id,task_id,stream_id,layer_type,layer_name,ori_layer_name\n"
                                          + "".join(",".join(map(str, r)) + "\n" for r in rows))
    records = sorted((syscnt, log_type, task_type, task_id, stream)
                     for stream, task_id, task_type, start, end in tasks
                     for log_type, syscnt in ((0, start), (1, end)) if syscnt is not None)
    (data / "hwts.data.0.slice_0").write_bytes(b"".join(
        HWTS.pack(lt | ((i & 15) << 4), tt, 0x6BD3, 0, task_id, sc, stream, *[0] * 11)
        for i, (sc, lt, tt, task_id, stream) in enumerate(records)))
    (data / "ts_track.data.0.slice_0").write_bytes(b"".join(
        STEP.pack(0, 10, 40, 0, sc, index, 1, 3, 0, tag, 0)
        for index, start, end in iterations for sc, tag in ((start, 0), (end, 1))))
    if calls:
        (data / "AclModule.acl_model.0.slice_0").write_bytes(b"".join(
            ACL.pack(0x5A5A, 0, t, s, e, pid, tid, n.encode(), 0, 0, 0, 0) for t, s, e, pid, tid, n in calls))
    import_collection(job)
    return job


TASKS = [
    (3, 1, 0, 2010, 2110),      # conv1, iteration 1
    (5, 3, 1, 2050, 2150),      # AA_CPU task with no layer.info row, iteration 1
    (3, 2, 0, 2120, 2420),      # "mish\x01one", iteration 1
    (3, 1, 0, 3010, 3110),      # iteration 2
    (3, 2, 0, 3120, 3420),
    (7, 9, 0, 5000, 5100),      # outside any iteration: task_time_0.json
    (3, 8, 0, None, 5200),      # an end without a start: no time, not in the timeline
]
ITERATIONS = [(1, 2000, 2500), (2, 3000, 3500)]
CALLS = [
    (4, host_ns(1500), host_ns(1600), PID, TID, "svp_acl_init"),
    (2, host_ns(2000) - 5, host_ns(2500) + 5, PID, TID, "svp_acl_mdl_execute"),
    (3, host_ns(2100), host_ns(2200), PID, 79, "svp_acl_rt_malloc"),
    (2, host_ns(3000) - 5, host_ns(3500) + 5, PID, TID, "svp_acl_mdl_execute"),
]
TASK_PID = ev.TASK_PID_BASE      # device 0


def export(job, **kwargs):
    selection = Selection(kwargs.pop("model_id", None), kwargs.pop("iteration_id", None))
    with open_report(job) as report:
        return write_timelines(report, selection, **kwargs)


def write_timelines(report, selection=Selection(), **kwargs):
    """The timelines of a report's layout written into its timeline/ (what export timeline does)."""
    report.check(selection)
    return tl.write_timelines(report, report.unit.layout.timelines(report, selection), report.unit.out / "timeline",
                              selection=selection, **kwargs)


def load(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def of(trace, ph):
    return [e for e in trace["traceEvents"] if e["ph"] == ph]


def thread_names(trace):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in of(trace, "M") if e["name"] == "thread_name"}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    job = make_job(tmp_path_factory.mktemp("tl"), TASKS, ITERATIONS, CALLS)
    export(job)
    return job


def test_file_names(job):
    names = sorted(p.name for p in (job / "timeline").iterdir())
    assert names == ["acl_0.net.1.2.json", "task_time_0.json", "task_time_0.net.1.2.json"]
    for path in (job / "timeline").iterdir():
        assert check_trace(path) == []


def test_task_events_exact_times_names_and_args(job):
    trace = load(job / "timeline" / "task_time_0.net.1.2.json")
    tasks = [e for e in of(trace, "X") if e["pid"] == TASK_PID]
    got = [(e["tid"], e["ts"], e["dur"], e["name"], e["args"]) for e in tasks]
    assert got == [
        (3, 1010.1, 1.0, "conv1", {"Task Type": "AA_CORE", "Stream Id": 3, "Task Id": 1, "Layer Id": 0, "Iteration": 1}),
        (5, 1010.5, 1.0, "AA_CPU", {"Task Type": "AA_CPU", "Stream Id": 5, "Task Id": 3, "Layer Id": "N/A",
                                    "Iteration": 1}),
        (3, 1011.2, 3.0, "mish?one", {"Task Type": "AA_CORE", "Stream Id": 3, "Task Id": 2, "Layer Id": 1,
                                      "Iteration": 1}),
        (3, 1020.1, 1.0, "conv1", {"Task Type": "AA_CORE", "Stream Id": 3, "Task Id": 1, "Layer Id": 0, "Iteration": 2}),
        (3, 1021.2, 3.0, "mish?one", {"Task Type": "AA_CORE", "Stream Id": 3, "Task Id": 2, "Layer Id": 1,
                                      "Iteration": 2}),
    ]
    for e in tasks:
        assert isinstance(e["ts"], float) and isinstance(e["dur"], float)


def test_metadata_first_and_thread_names(job):
    trace = load(job / "timeline" / "task_time_0.net.1.2.json")
    phases = [e["ph"] for e in trace["traceEvents"]]
    assert phases.index("X") == phases.count("M") and set(phases[:phases.count("M")]) == {"M"}
    processes = {e["pid"]: e["args"]["name"] for e in of(trace, "M") if e["name"] == "process_name"}
    assert processes == {TASK_PID: "Task Scheduler", PID: "AscendCL"}
    assert thread_names(trace) == {(TASK_PID, 3): "Stream 3", (TASK_PID, 5): "Stream 5", (PID, TID): "Thread 78"}
    sort = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in of(trace, "M") if e["name"] == "thread_sort_index"}
    assert sort[(TASK_PID, 3)] < sort[(TASK_PID, 5)]


def test_other_data_and_top_level(job):
    trace = load(job / "timeline" / "task_time_0.net.1.2.json")
    assert trace["displayTimeUnit"] == "ms"
    other = trace["otherData"]
    assert other["collectionTimeBegin"] == BEGIN_US and other["deviceId"] == "0"
    assert other["model"] == {"modelId": 1, "modelName": "net", "batchNum": 2}
    assert other["iteration"] is None and other["msprofVersion"]


def test_outside_tasks_file(job):
    trace = load(job / "timeline" / "task_time_0.json")
    assert [(e["tid"], e["ts"], e["dur"], e["name"], e["args"]["Iteration"], e["args"]["Layer Id"])
            for e in of(trace, "X")] == [(7, 1040.0, 1.0, "AA_CORE", "N/A", "N/A")]
    assert of(trace, "s") == [] and trace["otherData"]["model"] is None


def test_acl_file(job):
    trace = load(job / "timeline" / "acl_0.net.1.2.json")
    got = [(e["pid"], e["tid"], e["ts"], e["dur"], e["name"], e["args"]) for e in of(trace, "X")]
    assert got == [
        (PID, TID, 1005.0, 1.0, "svp_acl_init", {"Mode": "ACL_OTHERS", "Process Id": PID, "Thread Id": TID}),
        (PID, TID, 1009.995, 5.01, "svp_acl_mdl_execute", {"Mode": "ACL_MODEL", "Process Id": PID, "Thread Id": TID}),
        (PID, 79, 1011.0, 1.0, "svp_acl_rt_malloc", {"Mode": "ACL_RTS", "Process Id": PID, "Thread Id": 79}),
        (PID, TID, 1019.995, 5.01, "svp_acl_mdl_execute", {"Mode": "ACL_MODEL", "Process Id": PID, "Thread Id": TID}),
    ]
    assert thread_names(trace) == {(PID, TID): "Thread 78", (PID, 79): "Thread 79"}
    assert {e["args"]["name"] for e in of(trace, "M") if e["name"] == "process_name"} == {"AscendCL"}


def test_host_to_device_flows(job):
    trace = load(job / "timeline" / "task_time_0.net.1.2.json")
    calls = [e for e in of(trace, "X") if e["pid"] == PID]
    assert [(c["ts"], c["dur"], c["name"], c["args"]["Iteration"]) for c in calls] == [
        (1009.995, 5.01, "svp_acl_mdl_execute", 1), (1019.995, 5.01, "svp_acl_mdl_execute", 2)]
    starts, ends = of(trace, "s"), of(trace, "f")
    assert len(starts) == len(ends) == 2
    # s at the iteration start, on the call's thread; f at the first task of the iteration (conv1), bp "e"
    assert [(s["pid"], s["tid"], s["ts"]) for s in starts] == [(PID, TID, 1010.0), (PID, TID, 1020.0)]
    assert [(f["pid"], f["tid"], f["ts"], f["bp"]) for f in ends] == [(TASK_PID, 3, 1010.1, "e"),
                                                                      (TASK_PID, 3, 1020.1, "e")]
    for s, f in zip(starts, ends):
        assert s["id"] == f["id"] and s["cat"] == f["cat"] == "HostToDevice"
        assert isinstance(s["id"], int) and 0 <= s["id"] < 2 ** 53
    assert starts[0]["id"] != starts[1]["id"]


def test_no_flow_when_the_iteration_is_not_inside_the_call(tmp_path):
    calls = [(2, host_ns(2000) + 5, host_ns(2500) + 5, PID, TID, "svp_acl_mdl_execute"),   # starts too late
             (2, host_ns(3000) - 5, host_ns(3500) + 5, PID, TID, "svp_acl_mdl_execute")]
    job = make_job(tmp_path, TASKS, ITERATIONS, calls)
    export(job)
    trace = load(job / "timeline" / "task_time_0.net.1.2.json")
    assert [s["ts"] for s in of(trace, "s")] == [1020.0]
    assert [f["ts"] for f in of(trace, "f")] == [1020.1]


def test_iteration_filter(job, tmp_path):
    """One iteration's export has a name of its own (``_iter<N>``) and leaves the whole run's files as they
    are (it overwrote the whole run's task_time and acl files of the same names: issue 38 #1); the acl file,
    which holds every call of the run, is the whole export's alone. A whole export keeps the iteration's file."""
    export(job)
    timeline = job / "timeline"
    whole = {p.name: p.read_bytes() for p in timeline.iterdir()}
    assert sorted(whole) == ["acl_0.net.1.2.json", "task_time_0.json", "task_time_0.net.1.2.json"]
    written = export(job, model_id=1, iteration_id=2)
    assert [p.name for p in written] == ["task_time_0.net.1.2_iter2.json"]
    assert {p.name: p.read_bytes() for p in timeline.iterdir() if p.name in whole} == whole
    trace = load(timeline / "task_time_0.net.1.2_iter2.json")
    assert check_trace(trace) == []
    assert {e["args"]["Iteration"] for e in of(trace, "X") if e["pid"] == TASK_PID} == {2}
    assert [f["ts"] for f in of(trace, "f")] == [1020.1]
    assert trace["otherData"]["iteration"] == 2
    with pytest.raises(UsageError):
        export(job, model_id=1, iteration_id=9)
    export(job)
    assert sorted(p.name for p in timeline.iterdir()) == sorted([*whole, "task_time_0.net.1.2_iter2.json"])
    (timeline / "task_time_0.net.1.2_iter2.json").unlink()         # (the other tests read the whole run's files)


@pytest.mark.parametrize("layout", ["JOB", "PROF"])
def test_a_slice_is_finished_once_it_holds_slice_bytes(tmp_path, monkeypatch, layout):
    """Events with long names make large files: a slice whose events reach SLICE_BYTES is finished after the
    batch being written (here a batch is one row: at most one flow group of four events), whatever its number of
    events. The slices hold every slice event once, each is valid and holds both ends of its flows (a PROF flow
    whose launch and task fall in different files is left out)."""
    from test_profgen import MULTI

    from fixtures import profgen as pg
    from msprof import api

    path = make_job(tmp_path, TASKS, ITERATIONS, CALLS) if layout == "JOB" else pg.write_prof(tmp_path, MULTI)

    def events(paths):
        return [line.rstrip(",") for p in paths for line in Path(p).read_text(encoding="utf-8").split("\n")
                if line.startswith('{"ph":') and not line.startswith('{"ph":"M"')]

    whole = api.export_timeline(path)
    full = sorted(events(whole))
    budget = 3 * max(map(len, full))
    monkeypatch.setattr(tl, "SLICE_BYTES", budget)
    monkeypatch.setattr(ev, "FETCH_ROWS", 1)
    sliced = api.export_timeline(path)
    assert len(sliced) > len(whole)
    if layout == "JOB":
        assert sorted(events(sliced)) == full
    else:
        slices = sorted(e for e in events(sliced) if e.startswith('{"ph":"X"'))
        assert slices == [e for e in full if e.startswith('{"ph":"X"')]
    for p in sliced:
        trace = load(p)
        assert check_trace(trace) == []
        assert {e["id"] for e in of(trace, "s")} == {e["id"] for e in of(trace, "f")}
        sizes = [len(line) + 2 for line in events([p])]
        assert sum(sizes) < budget + 4 * max(map(len, full)) + 8, (p.name, sum(sizes), budget)


def test_times_before_the_collection_start_are_exact(tmp_path):
    """A collection that began mid-way (start_info's clockMonotonicRaw later than the first tasks and calls):
    the times before it are negative, printed from their text; every task's and ACL call's ts and dur read
    back as the exact ns / 1000 on both sides of the origin."""
    job = make_job(tmp_path, TASKS, ITERATIONS, CALLS)
    origin = host_ns(2100) + 3
    (job / "start_info.0").write_text(json.dumps({"collectionTimeBegin": str(BEGIN_US),
                                                   "clockMonotonicRaw": str(origin)}))
    import_collection(job)
    traces = [load(p) for p in export(job)]
    assert all(check_trace(t) == [] for t in traces)
    tasks = sorted((e["ts"], e["dur"]) for t in traces for e in of(t, "X") if e["pid"] == TASK_PID)
    assert tasks == sorted(((host_ns(s) - origin) / 1000, (e - s) * 10 / 1000)
                           for _stream, _task, _type, s, e in TASKS if s is not None and e is not None)
    assert tasks[0][0] < 0 < tasks[-1][0]
    [acl] = [t for t in traces if t["otherData"]["file"] == "acl"]
    calls = sorted((e["ts"], e["dur"]) for e in of(acl, "X"))
    assert calls == sorted(((s - origin) / 1000, (e - s) / 1000) for _type, s, e, _pid, _tid, _name in CALLS)
    assert calls[0][0] < 0 < calls[-1][0]


def test_unpaired_tasks_are_counted(job):
    import logging

    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = logging.getLogger("msprof")
    logger.addHandler(handler)
    try:
        export(job)
    finally:
        logger.removeHandler(handler)
    unpaired = [m for m in messages if "unpaired" in m]
    assert unpaired == ["task_time_0: 1 unpaired task record(s) have no time and are not in the timeline"]


def test_partial_overlap_goes_to_an_overlap_thread(tmp_path):
    tasks = [(3, 1, 0, 2010, 2110), (3, 2, 0, 2050, 2200),      # partial overlap (corrupt data)
             (3, 4, 0, 2060, 2080),                             # nested in task 1: stays on Stream 3
             (3, 5, 0, 2100, 2300),                             # overlaps task 1 and task 2: second overlap lane
             (3, 6, 0, 2300, 2400)]                             # touches task 5 and fits Stream 3 again
    job = make_job(tmp_path, tasks, [(1, 2000, 2500)], [])
    export(job)
    trace = load(job / "timeline" / "task_time_0.net.1.2.json")
    assert check_trace(trace) == []
    by_task = {e["args"]["Task Id"]: e["tid"] for e in of(trace, "X")}
    names = thread_names(trace)
    assert names[(TASK_PID, by_task[1])] == "Stream 3"
    assert names[(TASK_PID, by_task[4])] == "Stream 3"
    assert names[(TASK_PID, by_task[2])] == "Stream 3 (overlap)"
    assert names[(TASK_PID, by_task[5])] == "Stream 3 (overlap 2)"
    assert names[(TASK_PID, by_task[6])] == "Stream 3"
    assert len(of(trace, "X")) == 5                         # nothing dropped
    assert all(e["args"]["Stream Id"] == 3 for e in of(trace, "X"))


def test_splitting_into_slices(tmp_path, monkeypatch):
    job = make_job(tmp_path, TASKS, ITERATIONS, CALLS)
    full = load(export(job)[0])
    monkeypatch.setattr(tl, "SLICE_EVENTS", 4)
    written = export(job)
    names = sorted(p.name for p in written)
    task_slices = [n for n in names if n.startswith("task_time_0.net")]
    # 5 tasks + 2 calls + 2 flows x 2 points = 11 events; a call, its flow and the first task stay together
    assert task_slices == [f"task_time_0.net.1.2_slice_{k}.json" for k in range(len(task_slices))]
    assert len(task_slices) >= 3
    assert not (job / "timeline" / "task_time_0.net.1.2.json").exists()     # the unsliced file is replaced
    assert (job / "timeline" / "acl_0.net.1.2.json").exists()                # 4 ACL calls fit one file
    events = []
    for k, name in enumerate(task_slices):
        trace = load(job / "timeline" / name)
        assert check_trace(trace) == []
        assert len([e for e in trace["traceEvents"] if e["ph"] != "M"]) <= 4
        assert trace["otherData"]["slice"] == k
        ids_s = {e["id"] for e in of(trace, "s")}
        assert ids_s == {e["id"] for e in of(trace, "f")}
        events += [e for e in trace["traceEvents"] if e["ph"] != "M"]
    key = lambda e: json.dumps(e, sort_keys=True)       # noqa: E731
    assert sorted(map(key, events)) == sorted(key(e) for e in full["traceEvents"] if e["ph"] != "M")
    monkeypatch.setattr(tl, "SLICE_EVENTS", 1_000_000)
    export(job)
    assert sorted(p.name for p in (job / "timeline").iterdir()) == [
        "acl_0.net.1.2.json", "task_time_0.json", "task_time_0.net.1.2.json"]


def dur_as_string(event_format: str, undo: bool = False) -> str:
    """An event format made to break the trace rules: its dur a JSON string (``undo``: back to a number)."""
    number, string = '"dur":%d.%03d', '"dur":"%d.%03d"'
    broken = event_format.replace(string, number) if undo else event_format.replace(number, string)
    assert broken != event_format
    return broken


@pytest.mark.parametrize("in_place", [False, True])
def test_a_broken_trace_is_an_internal_error_and_nothing_is_replaced(tmp_path, monkeypatch, in_place):
    job = make_job(tmp_path, TASKS, ITERATIONS, CALLS)
    export(job)
    if in_place:
        monkeypatch.setattr(tl, "IN_PLACE_MIN_BYTES", 0)
    target = job / "timeline" / "task_time_0.net.1.2.json"
    before = target.read_bytes()
    monkeypatch.setattr(jt, "_X_TASK", dur_as_string(jt._X_TASK))
    with pytest.raises(tl.TraceError, match="breaks the trace rules"):
        export(job)
    assert target.read_bytes() == before
    assert not [p for p in (job / "timeline").iterdir() if p.name.startswith(".")]   # temporaries removed


def test_generated_network_matches_truth(tmp_path):
    """The JOB generator's truth (fixtures/board/jobgen.py): every task and execute call, to the ns."""
    from fixtures.board.jobgen import build, detection_network

    job_truth = build(detection_network("mish", executions=2))
    path = job_truth.write(tmp_path)
    import_collection(path)
    written = export(path)
    model = job_truth.models[0]
    base = f"task_time_{job_truth.device_id}.{model['name']}.{model['id']}.{model['batch_num']}.json"
    trace = load(path / "timeline" / base)
    assert check_trace(trace) == []

    def rel_us(host_ns_value):
        return float(int(round(Fraction(host_ns_value) - job_truth.clock_monotonic_raw_ns)) / 1000)

    expected = sorted((t["stream_id"], rel_us(job_truth.syscnt_to_host_ns(t["start_syscnt"])),
                       rel_us(job_truth.syscnt_to_host_ns(t["end_syscnt"])), t["layer_name"], t["index_id"])
                      for t in job_truth.recorded_tasks())
    got = sorted((e["tid"], e["ts"], round(e["ts"] + e["dur"], 3), e["name"], e["args"]["Iteration"])
                 for e in of(trace, "X") if e["pid"] != job_truth.desc["pid"])
    assert got == expected
    calls = sorted((rel_us(c["start_ns"]), rel_us(c["end_ns"])) for c in job_truth.execute_calls())
    got_calls = sorted((e["ts"], round(e["ts"] + e["dur"], 3)) for e in of(trace, "X")
                       if e["pid"] == job_truth.desc["pid"])
    assert got_calls == calls
    assert len(of(trace, "s")) == len(of(trace, "f")) == 2
    acl = load(next(p for p in written if p.name.startswith("acl_")))
    assert len(of(acl, "X")) == len(job_truth.acl_calls)
    assert {(e["tid"], e["name"]) for e in of(acl, "X")} == {(c["tid"], c["name"]) for c in job_truth.acl_calls}


def test_clean_name():
    assert ev.clean_name("a\x00b\x1fc\x7fd\x9fe") == "a?b?c?d?e"
    assert ev.clean_name("\ud800x") == "?x"
    assert ev.clean_name(None) == ""


def test_acl_timeline_written_by_a_child_process_is_identical(tmp_path, monkeypatch):
    job = make_job(tmp_path, TASKS, ITERATIONS, CALLS)
    inline = {p.name: p.read_bytes() for p in export(job)}
    monkeypatch.setattr(tl, "PARALLEL_MIN_EVENTS", 0)
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    written = export(job)
    assert [p.name for p in written] == list(inline)            # same files, same order (acl last)
    assert {p.name: p.read_bytes() for p in written} == inline
    assert not [p for p in (job / "timeline").iterdir() if p.name.startswith(".")]


def test_large_slices_are_finished_in_place(tmp_path, monkeypatch):
    """A large slice gets its metadata written into the room left before its body (behind a line of
    spaces) instead of a copy of the body: same JSON, checked, no temporaries; when the metadata do not
    fit, the slice is rewritten exactly as a small one is."""
    job = make_job(tmp_path, TASKS, ITERATIONS, CALLS)
    exact = {p.name: p.read_bytes() for p in export(job)}
    monkeypatch.setattr(tl, "IN_PLACE_MIN_BYTES", 0)
    monkeypatch.setattr(tl, "HEAD_ROOM", 2000)
    written = export(job)
    assert [p.name for p in written] == list(exact)
    for path in written:
        data = path.read_bytes()
        first, second, _ = data.split(b"\n", 2)
        assert first == b'{"traceEvents":[' and set(second) <= {ord(" ")}
        assert len(data) == len(exact[path.name]) + 2000 - len(exact[path.name].split(b',\n{"ph":"X"', 1)[0])
        assert json.loads(data) == json.loads(exact[path.name])
        assert check_trace(path) == []
    monkeypatch.setattr(tl, "HEAD_ROOM", 300)                 # the task file's metadata do not fit
    written = export(job)
    assert (job / "timeline" / "task_time_0.net.1.2.json").read_bytes() == exact["task_time_0.net.1.2.json"]
    assert {p.name: json.loads(p.read_bytes()) for p in written} == {n: json.loads(b) for n, b in exact.items()}
    assert not [p for p in (job / "timeline").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("in_child", [False, True])
def test_files_above_the_check_limit_are_checked_only_on_request(tmp_path, monkeypatch, in_child):
    """A slice of more than CHECK_MAX_EVENTS events is not re-read by default; ``check_all`` (the CLI's
    --check) checks it. Shown with a writer made to break the rules (dur as a string): the broken files
    get through unchecked by default and are refused with the check."""
    from click.testing import CliRunner

    from msprof.cli import cli

    job = make_job(tmp_path, TASKS, ITERATIONS, CALLS)
    exact = {p.name: p.read_bytes() for p in export(job)}
    if in_child:
        monkeypatch.setattr(tl, "PARALLEL_MIN_EVENTS", 0)
        monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(jt, "_X_TASK", dur_as_string(jt._X_TASK))
    monkeypatch.setattr(jt, "_X_ACL", dur_as_string(jt._X_ACL))
    monkeypatch.setattr(tl, "CHECK_MAX_EVENTS", 3)      # task file: 9 events, acl: 4, outside tasks: 1
    with pytest.raises(tl.TraceError, match="task_time_0.json breaks the trace rules"):
        export(job)                                      # the 1-event file is still checked
    monkeypatch.setattr(tl, "CHECK_MAX_EVENTS", 0)
    written = {p.name: p for p in export(job)}
    assert set(written) == set(exact)
    assert check_trace(written["task_time_0.net.1.2.json"]) and check_trace(written["acl_0.net.1.2.json"])
    with pytest.raises(tl.TraceError, match="task_time_0.net.1.2.json breaks the trace rules"):
        export(job, check_all=True)
    result = CliRunner().invoke(cli, ["export", "timeline", "--check", "-dir", str(job)])
    assert isinstance(result.exception, tl.TraceError)           # main() turns it into exit 1
    assert "task_time_0.net.1.2.json breaks the trace rules" in str(result.exception)
    monkeypatch.setattr(jt, "_X_TASK", dur_as_string(jt._X_TASK, undo=True))
    with pytest.raises(tl.TraceError, match="acl_0.net.1.2.json breaks the trace rules"):
        export(job, check_all=True)
    assert not [p for p in (job / "timeline").iterdir() if p.name.startswith(".")]


def test_check_limit_in_the_cli_help(msprof_cli):
    result = msprof_cli("export", "timeline", "--help")
    assert result.returncode == 0 and f"{tl.CHECK_MAX_EVENTS:,}" in result.stdout


@pytest.mark.parametrize("seed", range(6))
def test_lanes_put_each_slice_on_the_first_lane_where_it_nests(seed):
    """Random slices of two threads, nested calls with strays that overlap them partly, fed in start order: each
    goes to the first lane of its thread where every slice still open when it starts encloses it (a new lane
    when none does), as a plain model of the rule finds (every placed slice kept and checked)."""
    import random

    rng = random.Random(seed)
    slices = []
    for thread in (1, 2):
        t = 0
        for _ in range(400):
            t += rng.choice([0, 1, 5, 40])
            outer = rng.randint(1, 60)
            slices.append((t, t + outer, thread))
            inner = t
            for _depth in range(rng.randint(0, 3)):          # calls nested in it (sharing ends sometimes)
                inner += rng.randint(0, 3)
                slices.append((inner, min(inner + rng.randint(0, 30), t + outer), thread))
            if rng.random() < 0.15:                          # one crossing its end
                slices.append((t + rng.randint(0, outer), t + outer + rng.randint(1, 20), thread))
    slices.sort(key=lambda s: (s[0], -s[1]))
    lanes = tl.Lanes()
    model = {}                  # thread -> per lane, every slice placed on it
    seen = {}                   # thread -> its lanes' tids, in the order they appeared
    for start, end, thread in slices:
        lane = lanes.place(thread, thread, "Thread", thread, start, end)
        placed = model.setdefault(thread, [])
        expected = next((i for i, on in enumerate(placed) if all(end <= e for s, e in on if e > start)),
                        len(placed))
        if expected == len(placed):
            placed.append([])
        placed[expected].append((start, end))
        tids = seen.setdefault(thread, [])
        if lane.tid not in tids:
            tids.append(lane.tid)
        assert tids.index(lane.tid) == expected, (start, end, thread)
    assert seen[1][0] == 1 and seen[2][0] == 2
    assert all(len(p) > 1 for p in model.values())           # overlap lanes were needed
