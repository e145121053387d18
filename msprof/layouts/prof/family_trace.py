"""The PROF_ data families' processes in the CANN layout's timeline (issue 37; docs/prof-format.md §11 and
docs/timeline.md), event for event as the reference analyser writes them, as event sources of the one trace
writer (msprof.trace) beside msprof.layouts.prof.cann_trace's:

* ``StepTraceSource``: a thread ``Step Trace(Model ID:<m>)`` of the device's Ascend Hardware process per
  model (tid: the app's pid + 70000 + the model's rank), each iteration's Iteration, FP_BP Time and Iteration
  Refresh slices and its Reduce and GetNext slices. Not written: the reference's Data_aug Bound "flow" (a
  ``t`` and an ``s`` event per iteration, all with the one text id "Data_aug Bound <pid>_<tid>", no ``f``),
  which breaks the trace rules viewers need (flows paired, integer ids: msprof.tracecheck), and its second
  naming of the Ascend Hardware process (metadata after the events);
* ``NpuMemSource``: the "NPU MEM" process, APP and Device counters (DDR, HBM and their sum, in KB) at each
  npu_mem sample.

``sources(report)`` gives those whose family has data: a device without them pays a one-row query each.
The families' rows are few (an iteration, a sample a millisecond): they are read a batch at a time, each
event formatted with its times as the reference prints them (msprof.layouts.prof.families.base.Context).
"""
import heapq
import json
from decimal import Decimal
from typing import Iterator, List, Optional

from msprof.collection import read_result_dir
from msprof.contract import EventSource
from msprof.events import FETCH_ROWS, device_number
from msprof.layouts.prof import communication_rows, tasks
from msprof.layouts.prof.families import memory, step_trace
from msprof.layouts.prof.families.base import Context
from msprof.layouts.prof.trace import CANN_DEVICE, _host_pid, cann_pid, cann_process
from msprof.layouts.timebase import ProfTime

STEP_TID_BASE = 70000            # the reference's offset of the step trace threads' tids and sort indexes
CANN_NPU_MEM = ("NPU MEM", 20)
KILOBYTE = 1024


def sources(report) -> List[EventSource]:
    """The families' timeline sources of a device that has their data."""
    made: List[EventSource] = []
    if _has_rows(report, "training_trace"):
        made.append(StepTraceSource(report))
    if _has_rows(report, "npu_mem"):
        made.append(NpuMemSource(report))
    return made


def numbered_before_overlap(made: List[EventSource]) -> int:
    """How many of the families' processes take the sort indexes from 20 before Overlap Analysis does (the
    reference numbers the processes it has no place for in the order it writes them)."""
    return sum(isinstance(source, NpuMemSource) for source in made)


def _has_rows(report, table: str) -> bool:
    """Whether the device database has ``table`` (an older msprof's may not) with a row in it."""
    conn = report.conn
    return (conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
            is not None and conn.execute(f"SELECT 1 FROM [{table}] LIMIT 1").fetchone() is not None)


def _event(**fields) -> str:
    return ",\n" + json.dumps(fields, separators=(",", ":"))


def _epoch_ns(text: str) -> int:
    return int(Decimal(text) * 1000)


class _Events(EventSource):
    """A family's events, each row (start ns, its events' texts, their count), in start order."""

    def start(self, row) -> int:
        return row[0]

    def write(self, rows: list, out, lanes) -> Optional[list]:
        texts, count = [], 0
        for k, (_start, text, events) in enumerate(rows):
            if count + events > out.room and count:
                out.add("".join(texts), count)
                return rows[k:]
            texts.append(text)
            count += events
        self.named(out)
        out.add("".join(texts), count)
        return None

    def named(self, out) -> None:
        """Name the source's process and threads in the file being written."""


class _Thread:
    """A thread as trace.Writer names it (its name and sort index)."""

    def __init__(self, name: str, sort: int):
        self.name, self.sort = name, sort


class StepTraceSource(_Events):
    """The step trace threads of the device's Ascend Hardware process (see the module's docstring); the
    reference names that process a second time with them."""

    noun, owner = "step trace slice", "model"

    def __init__(self, report):
        self.report = report
        self.context = Context(read_result_dir(report.unit.path))
        self.app_pid = _host_pid(report)
        device = device_number(report)
        self.pid = cann_pid(self.app_pid, CANN_DEVICE, device)
        self.process = cann_process(CANN_DEVICE, device)
        models = sorted(m for (m,) in report.conn.execute("SELECT DISTINCT model_id FROM training_trace")
                        if m != step_trace.UNKNOWN_MODEL)
        self.tids = {m: self.app_pid + k + STEP_TID_BASE for k, m in enumerate(models)}
        self.threads = {tid: _Thread(f"Step Trace(Model ID:{m})", m + STEP_TID_BASE) for m, tid in self.tids.items()}

    def batches(self, window=None) -> Iterator[list]:
        if window is not None and window[0] == 1:     # (a few events per iteration: the first half has them)
            return iter(())
        rows = []
        for model, index, begin, fp, bp, end in self.report.conn.execute(
                "SELECT model_id, iteration_id, step_start, fp, bp, step_end FROM training_trace ORDER BY rank"):
            tid = self.tids.get(model)
            if tid is not None:
                rows.append(self._iteration(model, index, tid, (begin, fp, bp, end)))
        rows.sort(key=lambda row: row[0])
        return iter([rows[k:k + FETCH_ROWS] for k in range(0, len(rows), FETCH_ROWS)])

    def _iteration(self, model: int, index: int, tid: int, marks: tuple) -> tuple:
        """(start ns, events, count) of an iteration: times as the reference prints them (device counters to
        local µs texts, durations in µs floats)."""
        ctx, pid = self.context, self.pid
        begin, fp, bp, end = marks
        text = ctx.device_text
        common = {"pid": pid, "tid": tid, "ph": "X"}
        marks_text = {"FP Start": text(fp) if fp else "N/A", "BP End": text(bp) if bp else "N/A",
                      "Iteration End": text(end)}
        events = [_event(name=f"Iteration {index}", ts=text(begin), dur=ctx.duration_us(end - begin),
                         args={"Iteration ID": index, **marks_text,
                               "Iteration Time(us)": ctx.duration_us(end - begin)}, cat="Iteration Time", **common)]
        if fp and bp:
            events.append(_event(name=f"FP_BP Time {index}", ts=text(fp), dur=ctx.duration_us(bp - fp),
                                 args={"Iteration ID": index, "FP Start": marks_text["FP Start"],
                                       "BP End": marks_text["BP End"], "FP_BP Time(us)": ctx.duration_us(bp - fp)},
                                 cat="FP_BP Time", **common))
            events.append(_event(name=f"Iteration Refresh {index}", ts=text(bp), dur=ctx.duration_us(end - bp),
                                 args={"Iteration ID": index, "BP End": marks_text["BP End"],
                                       "Iteration End": marks_text["Iteration End"],
                                       "Iteration Refresh(us)": ctx.duration_us(end - bp)},
                                 cat="Iteration Refresh", **common))
        events += self._reduces(model, index, end, common)
        events += self._get_next(model, index, common)
        return _epoch_ns(text(begin)), "".join(events), len(events)

    def _reduces(self, model: int, index: int, end: int, common: dict) -> List[str]:
        text, ctx = self.context.device_text, self.context
        return [_event(name=f"Reduce_{index}_{k}", ts=text(start), dur=ctx.duration_us(stop - start),
                       args={"Iteration ID": index, f"Reduce Start {k}": text(start), f"Reduce End {k}": text(stop)},
                       cat="Reduce", **common)
                for k, (start, stop) in enumerate(self.report.conn.execute(
                    "SELECT start, end FROM all_reduce WHERE step_end = ? AND model_id = ? ORDER BY seq",
                    (end, model)))]

    def _get_next(self, model: int, index: int, common: dict) -> List[str]:
        text, ctx = self.context.device_text, self.context
        return [_event(name="GetNext", ts=text(start), dur=ctx.duration_us(stop - start),
                       args={"GetNext Start": text(start), "GetNext End": text(stop),
                             "GetNext Time(us)": ctx.duration_us(stop - start)}, cat="GetNext Time", **common)
                for start, stop in self.report.conn.execute(
                    "SELECT start, end FROM get_next WHERE iteration_id = ? AND model_id = ? AND start AND end"
                    " ORDER BY rowid", (index, model))]

    def named(self, out) -> None:
        for tid, thread in self.threads.items():
            out.use(self.pid, tid, self.process, thread)


class NpuMemSource(_Events):
    """The "NPU MEM" process of a device: at each npu_mem sample (its time as npu_mem's file prints it), the
    APP or Device counters DDR, HBM and Memory (their sum), in KB."""

    noun, owner = "memory sample", "process"

    def __init__(self, report):
        self.report = report
        self.context = Context(read_result_dir(report.unit.path))
        device = device_number(report)
        self.pid = cann_pid(_host_pid(report), CANN_NPU_MEM, device)
        self.process = cann_process(CANN_NPU_MEM, device)

    def batches(self, window=None) -> Iterator[list]:
        if window is not None and window[0] == 1:
            return iter(())
        ctx = self.context
        field = "ts_v2" if str(ctx.result.info.get("version", "")) == "2.0" else "ts_v1"
        cursor = self.report.conn.execute(f"SELECT {field}, event, ddr, hbm FROM npu_mem ORDER BY {field}, rowid")
        return (list(map(self._sample, rows)) for rows in iter(lambda: cursor.fetchmany(FETCH_ROWS), []))

    def _sample(self, row: tuple) -> tuple:
        ts, event, ddr, hbm = row
        text = memory.sample_text(self.context, ts)
        who = memory.EVENTS.get(event, "")
        events = "".join(_event(name=f"{who}/{kind}", ts=text, pid=self.pid, tid=0, args={"KB": value / KILOBYTE},
                                ph="C") for kind, value in (("DDR", ddr), ("HBM", hbm), ("Memory", ddr + hbm)))
        return _epoch_ns(text), events, 3

    def named(self, out) -> None:
        out.use(self.pid, 0, self.process, None)


# --- Overlap Analysis with communication ---------------------------------------------------------------------
# the task types the reference counts as computing (its COMP_TASK_TYPE): the others bound the Free time before the
# first section and after the last
COMPUTING_TYPES = ("AI_CORE", "AI_VECTOR_CORE", "FFTS_PLUS", "MIX_AIC", "MIX_AIV")
COMPUTING, COMMUNICATION, NOT_OVERLAPPED, FREE = 0, 1, 2, 3


def communication_sections(report) -> List[tuple]:
    """The communication op runs' sections (epoch ns), merged where they touch or overlap, in start order."""
    sections: List[list] = []
    for start, end in report.conn.execute(
            f"SELECT {ProfTime.epoch_ns_sql('start_ns')}, {ProfTime.epoch_ns_sql('end_ns')} FROM"
            f" {communication_rows.TABLE} ORDER BY start_ns", report.params):
        if sections and start <= sections[-1][1]:
            sections[-1][1] = max(sections[-1][1], end)
        else:
            sections.append([start, end])
    return [tuple(s) for s in sections]


def task_bounds(report) -> tuple:
    """(earliest start, latest end) in epoch ns of the tasks that are not computing (None, None without)."""
    query = tasks.task_query(report, ("start_ns", "end_ns", "task_type"), selected=False)
    types = ", ".join(f"'{t}'" for t in COMPUTING_TYPES)
    first, last = ProfTime.epoch_ns_sql("start_ns"), ProfTime.epoch_ns_sql("end_ns")
    return report.conn.execute(f"SELECT min({first}), max({last}) FROM ({query})"
                               f" WHERE task_type NOT IN ({types}, 'UNKNOWN')", report.params).fetchone()


def with_communication(computing: Iterator[tuple], communication: List[tuple], bounds: tuple) -> Iterator[tuple]:
    """(tid, start, end) of the Overlap Analysis sections as the reference computes them from the computing
    sections (in start order) and the communication ones: each of both, the communication no computing covers
    and the gaps between all of them (and from the first and to the last task that is not computing, ``bounds``:
    (earliest start, latest end) or None). The walk keeps one section: the one reaching furthest so far, and
    whether it is communication."""
    merged = _merged(communication, computing)
    current = next(merged, None)
    if current is None:
        return
    lowest, highest = current[0], current[1]
    yield from _drawn(current)
    for section in merged:
        yield from _drawn(section)
        highest = max(highest, section[1])
        start, end, comm = section[:3]
        if current[1] < start:                        # a gap
            yield FREE, current[1], start
            if current[2]:
                yield NOT_OVERLAPPED, current[0], current[1]
            current = section
        elif current[1] < end:                        # overlapping, not containing
            if current[2]:
                yield NOT_OVERLAPPED, current[0], start
                current = (current[1], end, False)
            if comm:
                current = (current[1], end, True)
        else:                                         # containing
            if current[2]:
                yield NOT_OVERLAPPED, current[0], start
                current = (end, current[1], True)
            if comm:
                current = (end, current[1], False)
    if current[2]:
        yield NOT_OVERLAPPED, current[0], current[1]
    if bounds is not None and bounds[1] is not None and highest < bounds[1]:
        yield FREE, highest, bounds[1]
    if bounds is not None and bounds[0] is not None and lowest > bounds[0]:
        yield FREE, bounds[0], lowest


def _merged(communication: List[tuple], computing: Iterator[tuple]) -> Iterator[tuple]:
    """Both kinds of sections by start, communication first at the same start (the reference's stable sort of
    the two lists, communication's first): (start, end, is communication, drawn tid)."""
    return heapq.merge(((s, e, True, COMMUNICATION) for s, e in communication),
                       ((s, e, False, COMPUTING) for s, e in computing), key=lambda section: section[0])


def _drawn(section: tuple) -> Iterator[tuple]:
    yield section[3], section[0], section[1]
