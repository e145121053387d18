"""PROF timeline: one Chrome trace per device (docs/prof.md "Timeline").

* process "CANN (host)": one thread per host thread, an X slice per API call (acl, model, node, runtime
  levels nest by time);
* process "Ascend Hardware (device N)": one thread per stream, an X slice per device task named by its op;
* "HostToDevice" flows from the task_track instant on the host thread (inside its runtime API) to the start
  of the device task.

Written one event per line (the layout msprof.export.tracecheck reads in one pass), through a temporary file
renamed into place. ``ts``/``dur`` are µs since the collection start (host monotonic clockMonotonicRaw).
"""
import json
from pathlib import Path

from msprof.atomic import atomic_open
from msprof.export.tracecheck import assert_valid
from msprof.prof import decoders as dec

HOST_PID, DEVICE_PID = 1, 2


def write_timeline(report, path: Path, model_id=None, iteration=None) -> Path:
    clock_mono = report.offset_us  # µs since epoch = mono µs + offset; ts = (ns - collection mono) / 1000
    base_ns = (report.begin_us - clock_mono) * 1000
    dumps = json.dumps
    with atomic_open(path, "w", encoding="utf-8") as out:
        out.write('{"traceEvents":[\n')
        first = [True]

        def emit(event):
            out.write(("" if first[0] else ",\n") + dumps(event, separators=(",", ":")))
            first[0] = False

        emit({"ph": "M", "name": "process_name", "pid": HOST_PID, "args": {"name": "CANN (host)"}})
        emit({"ph": "M", "name": "process_name", "pid": DEVICE_PID,
              "args": {"name": f"Ascend Hardware (device {report.device_id})"}})
        streams = [s for (s,) in report.conn.execute("SELECT DISTINCT stream_id FROM task ORDER BY stream_id")]
        for s in streams:
            emit({"ph": "M", "name": "thread_name", "pid": DEVICE_PID, "tid": s, "args": {"name": f"Stream {s}"}})
        threads = []
        if report.has_host:
            threads = [t for (t,) in report.conn.execute("SELECT DISTINCT thread FROM host.api ORDER BY thread")]
        for t in threads:
            emit({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": t, "args": {"name": f"Thread {t}"}})
        if report.has_host:
            names = report.conn.execute(
                "SELECT CASE WHEN a.level IN (20000, 15000, 10000, 5000)"
                " THEN coalesce(tn.name, CAST(a.struct_type AS TEXT))"
                " ELSE coalesce(hs.text, CAST(a.item_id AS TEXT)) END, a.level, a.thread, a.begin, a.[end],"
                " coalesce(hs.text, CAST(a.item_id AS TEXT))"
                " FROM host.api a LEFT JOIN host.type_name tn ON tn.level = a.level AND tn.type = a.struct_type"
                " LEFT JOIN host.hash_string hs ON hs.hash = a.item_id ORDER BY a.thread, a.begin, a.level DESC")
            for name, level, thread, begin, end, item in names:
                start = report.host_ns(begin)
                emit({"ph": "X", "name": name, "pid": HOST_PID, "tid": thread, "ts": (start - base_ns) / 1000,
                      "dur": (report.host_ns(end) - start) / 1000,
                      "args": {"level": dec.LEVELS.get(level, str(level)), "item": item}})
        flow_id = 0
        for task in report.tasks(model_id, iteration):
            ts = (task["start_ns"] - base_ns) / 1000
            name = task["op_name"] or task["kernel_name"] or dec.HWTS_TASK_TYPES.get(task["hw_type"], "task")
            emit({"ph": "X", "name": name, "pid": DEVICE_PID, "tid": task["stream_id"], "ts": ts,
                  "dur": task["dur_ns"] / 1000,
                  "args": {"Task ID": task["task_id"], "Stream ID": task["stream_id"],
                           "Task Type": task["task_type"] or "UNKNOWN", "OP Type": task["op_type"],
                           "Model ID": task["model_id"], "Iteration": task["iteration"]}})
            if task.get("track_ts") is not None and task.get("thread") is not None:
                flow_id += 1
                emit({"ph": "s", "name": "HostToDevice", "cat": "HostToDevice", "id": flow_id, "pid": HOST_PID,
                      "tid": task["thread"], "ts": (report.host_ns(task["track_ts"]) - base_ns) / 1000})
                emit({"ph": "f", "bp": "e", "name": "HostToDevice", "cat": "HostToDevice", "id": flow_id,
                      "pid": DEVICE_PID, "tid": task["stream_id"], "ts": ts})
        out.write("\n]}\n")
        out.flush()
        assert_valid(Path(out.name))  # every trace is checked before it replaces the previous one
    return path
