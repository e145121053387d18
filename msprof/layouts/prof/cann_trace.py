"""The CANN layout's timeline sources (docs/prof.md "The CANN layout", docs/ecosystem-target.md §2): what the
Ascend tools read, event for event as the reference analyser writes it (``timelines``: what the PROF layout
gives for the CANN layout in place of msprof.layouts.prof.trace's timeline, whose sources these build on).

* ``CannHostSource``: the host's calls with the reference's args (``Thread Id``, ``Mode``, ``level``, ``id``,
  ``item_id``, ``connection_id``); a PROF_'s devices after the first write only the call whose connection_id
  is 0, as the reference's merge keeps it from every device (it takes 0 for "none");
* ``CannTaskSource``: the device's tasks with the reference's args, and a HostToDevice flow to every execution
  of a launched task, named by its id (``HostToDevice<id>``);
* ``OverlapSource`` ("Overlap Analysis") and ``FreqSource`` ("AI Core Freq").

Which events (``Kept``): the reference writes the events of the device, flow ends and AI Core Freq samples
that begin at or after start_info's collectionTimeBegin, or span it; flow starts whatever their time; host
calls that begin at or after it (the printed time read as a float) or lie within a ModelLoad call of their
thread (§2.3–2.4).
"""
import bisect
import functools
import itertools
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Dict, Iterator, List, NamedTuple, Optional

from msprof.decode.acl import API_TYPES
from msprof.decode.api_event import LEVEL_ACL, LEVEL_NODE, LEVELS, NAMED_BY_TYPE
from msprof.events import FETCH_ROWS, FLOW_CATEGORY, batches, device_number, jstr, us_text
from msprof.contract import EventSource, Selection, Timeline
from msprof.layouts.prof import communication_rows, family_trace, tasks
from msprof.layouts.prof.communication_trace import CommunicationSource
from msprof.layouts.prof.associate import UNKNOWN_MODEL
from msprof.layouts.timebase import ProfTime
from msprof.layouts.prof.trace import (AI_CORE_FREQ_PLATFORMS, CANN_FREQ, CANN_OVERLAP, FREQ_STEP_US, LEVEL_NAMES,
                                       NO_CONTEXT, TASK_NAME_SQL, HostSource, ProfTaskSource, _formats, _host_pid,
                                       _split, cann_pid, cann_process, event_count, window_span)

# the reference's names of the acl calls' kinds (struct type >> 16: its AclApiTag), msprof's JOB names first
ACL_MODES = {**API_TYPES, 5: "ACL_NN", 6: "ACL_ASCENDC", 7: "HOST_HCCL", 9: "ACL_DVPP", 10: "ACL_GRAPH",
             11: "ACL_ATB"}
# the reference's names of the API levels (its LEVEL_MAP); other levels: their name capitalised
CANN_LAYERS = {"acl": "AscendCL"}
# the model-level call whose calls the time filter keeps, whenever they began (§2.3)
MODEL_LOAD = "ModelLoad"
# Device times in ns since the epoch, rounded as the reference prints them (half to even at an exact half ns,
# which a HWTS period that is not a whole number of ns makes): the times the timeline's host calls are in
# (ProfTime.on_the_epoch), and op_summary's
EPOCH_NS = ProfTime.epoch_ns_sql
# a task without a launch (no connection) and without a context (subtask)
NO_CONNECTION = -1
_API = (',\n{"ph":"X","pid":<PID>,"tid":%d,"ts":"%U","dur":%s,"name":%s,"args":{"Thread Id":%d,"Mode":%s,'
        '"level":%s,"id":%s,"item_id":%s,"connection_id":%d}}')
_TASK = (',\n{"ph":"X","pid":<PID>,"tid":%d,"ts":"%U","dur":%s,"name":%s,"args":{"Model Id":%d,"Task Type":%s,'
         '"Physic Stream Id":%d,"Task Id":%d,"Batch Id":%d,"Subtask Id":' + str(NO_CONTEXT) + ',"connection_id":%d}}')
_START = ',\n{"ph":"s","cat":"%s","name":"%s%%s","id":"%%s","pid":<HOST>,"tid":%%d,"ts":"%%U"}' % (
    FLOW_CATEGORY, FLOW_CATEGORY)
_END = ',\n{"ph":"f","bp":"e","cat":"%s","name":"%s%%s","id":"%%s","pid":<PID>,"tid":%%d,"ts":"%%U"}' % (
    FLOW_CATEGORY, FLOW_CATEGORY)
_OVERLAP = ',\n{"ph":"X","pid":<PID>,"tid":%d,"ts":%U,"dur":%U,"name":%s}'
# Overlap Analysis's threads (all four named, as the reference does, though msprof has no communication data)
OVERLAP_THREADS = {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}
_FREQ = ',\n{"name":"AI Core Freq","ts":"%s","pid":<PID>,"tid":0,"args":{"MHz":%s},"ph":"C"}'


class Kept:
    """The reference's time filter (§2.3–2.4), over epoch ns: ``begin_ns`` is collectionTimeBegin's first ns."""

    def __init__(self, report):
        self.begin_ns = int(report.params["begin_ns"])
        self.begin_us = float(report.time.begin_us)
        self.loads: Dict[int, list] = {}         # thread → its ModelLoad calls (start, end) met so far

    def event(self, start: int, end: int) -> bool:
        """A device task, section, flow end or sample: begins at or after the beginning, or spans it."""
        return start >= self.begin_ns or end > self.begin_ns

    def call(self, thread: int, start: int, end: int, load: bool) -> bool:
        """A host call (in start order): the reference compares the printed start read as a float (0.25 µs
        steps at today's epoch, hence the exact test near the beginning); a ModelLoad keeps its thread's calls
        within it."""
        if load:
            self.loads.setdefault(thread, []).append((start, end))
        if start >= self.begin_ns or (start > self.begin_ns - 1000 and float(us_text(start)) >= self.begin_us):
            return True
        return any(a <= start <= b for a, b in self.loads.get(thread, ()))


class ConnectionIds:
    """The reference's connection_id of a host call by its seq (msprof.decode.api_event): a decoded call's is its
    rank among the calls plus the events that came before it in the stream; a call paired from events keeps its
    end's."""

    def __init__(self, conn):
        (first,) = conn.execute("SELECT min(seq) FROM host.api WHERE from_events = 0").fetchone()
        self.first = first or 0
        self.paired = dict(conn.execute("SELECT seq, conn_id FROM host.api WHERE from_events = 1"))
        # each event's number less the events before it: the calls before it
        self.bounds = [conn_id - k for k, (conn_id,) in enumerate(
            conn.execute("SELECT conn_id FROM host.event WHERE conn_id IS NOT NULL ORDER BY conn_id"))]

    def __call__(self, seq: Optional[int]) -> int:
        if seq is None:
            return NO_CONNECTION
        if seq in self.paired:
            return self.paired[seq]
        rank = seq - self.first
        return rank + bisect.bisect_right(self.bounds, rank) if self.bounds else rank


class CannHostSource(HostSource):
    """The host's calls as the reference writes them (see the module's docstring)."""

    def __init__(self, report, selection: Selection, written: bool = True):
        super().__init__(report, selection, True, written)
        self.formats = _formats(_API, self.pid)
        self.texts = _CannTexts(self)
        self.ids = ConnectionIds(report.conn)
        self.kept = Kept(report)
        self.columns += ", seq, from_events, [end] - begin"
        self.host_us = self.time.host_us

    def write(self, rows: list, out, lanes) -> Optional[list]:
        texts, ids, kept = self.texts, self.ids, self.kept
        place, room, pid, written = lanes.place, out.room, self.pid, self.written
        _fmt, fmt_any = self.formats
        threads, index = out.threads, out.slice_index
        events: List[str] = []
        count = 0
        pending = iter(rows)
        for row in pending:
            level, thread, struct_type, item, start, end, seq, from_events, delta = row
            if end < start:
                self.backwards += 1
                continue
            if count >= room:           # (the row as it came, and those after it: for the next file)
                out.add("".join(events), count)
                return [row, *pending]
            name, mode, level_text, id_text, item_text, load = texts[(level, struct_type, item, from_events)]
            if not kept.call(thread, start, end, load):
                if level == LEVEL_NODE:         # (the flows of its tasks still start on its thread)
                    self.remember(thread, start, thread, index)
                continue
            lane = place(thread, thread, "Thread", thread, start, end)
            tid = lane.tid
            if level == LEVEL_NODE:
                self.remember(thread, start, tid, index)
            if (pid, tid) not in threads:
                out.use(pid, tid, self.process, lane)
            conn_id = ids(seq)
            if not written and conn_id != 0:
                continue
            # (dur: the recorded duration in the reference's float operations, ticks or ns)
            events.append(fmt_any % (tid, us_text(start), repr(self.host_us(delta)), name, thread, mode, level_text,
                                     id_text, item_text, conn_id))
            count += 1
        out.add("".join(events), count)
        return None


class _CannTexts(dict):
    """(level, struct type, item id, paired from events) → the JSON texts of a call's name, Mode, level, id and
    item_id, and whether it is a ModelLoad, as the reference names them (§2.3): a call's Mode is its type's
    name (acl: its kind, ACL_OP…), its id the acl API's name ("0" at other levels), its item_id the item's
    string; a call paired from events has the number 0 for id and its raw item."""

    LIMIT = 100_000

    def __init__(self, host: CannHostSource):
        super().__init__()
        self.host = host

    def __missing__(self, key) -> tuple:
        level, struct_type, item, paired = key
        types, strings = self.host.types, self.host.strings
        type_name = types.get((level, struct_type))
        unsigned = item & 0xFFFFFFFFFFFFFFFF
        text = strings.get(item)
        if level == LEVEL_ACL and not paired:
            mode = ACL_MODES.get(struct_type >> 16, str(struct_type >> 16))
            api_id = jstr(type_name if type_name is not None else str(struct_type))
        else:
            mode = type_name if type_name is not None else str(struct_type)
            api_id = "0" if paired else '"0"'
        if level == LEVEL_ACL:
            name = "0" if paired else (type_name if type_name is not None else str(struct_type))
        elif level in NAMED_BY_TYPE:
            name = mode
        else:
            name = text if text is not None else str(unsigned)
        layer = LEVELS.get(level, str(level))
        name = f"{CANN_LAYERS.get(layer, layer.capitalize())}@{name}"
        item_text = str(unsigned) if paired else jstr(text if text is not None else str(unsigned))
        value = (jstr(name), jstr(mode), LEVEL_NAMES.get(level) or jstr(str(level)), api_id, item_text,
                 mode == MODEL_LOAD)
        if len(self) < self.LIMIT:
            self[key] = value
        return value


def timelines(report, selection: Selection, host: bool = True) -> List[Timeline]:
    """The CANN layout's timeline of a device, ``msprof`` (named by msprof.merged); ``host``: with the host's
    calls (a PROF_'s first device; the others write only the call of connection_id 0). About a flow start per
    task more than msprof's own."""
    if not report.has_tasks and not report.has_api:
        return []
    return [Timeline("msprof", None, _Sources(selection, host), event_count(report) + report.count("task"),
                     functools.partial(_split, cann=True))]


class _Sources:
    """Picklable factory of the timeline's sources: the tasks drive; the others are merged in."""

    def __init__(self, selection: Selection, host: bool = True):
        self.selection, self.host = selection, host

    def __call__(self, report) -> List[EventSource]:
        calls = CannHostSource(report, self.selection, self.host)
        made = [CannTaskSource(report, self.selection, calls), calls]
        families = family_trace.sources(report)
        if self.selection.everything and report.communication_ops:
            families.append(CommunicationSource(report, calls))
        if report.has_tasks:
            made.append(OverlapSource(report, self.selection, family_trace.numbered_before_overlap(families)))
        if report.platform in AI_CORE_FREQ_PLATFORMS and report.aic_mhz:
            made.append(FreqSource(report))
        return made + families


class CannTaskSource(ProfTaskSource):
    """The device's tasks as the reference writes them (see the module's docstring): a flow to every
    execution of a launched task, from the task_track record of the key's last launch (the reference keys its
    launches by (device, stream, task, batch), the last one kept), its start whatever the time, its end with
    its task; ``dur`` the duration of the unrounded ends (a HWTS period that is not a whole number of ns
    gives more than three decimals, as from the reference)."""

    FIELDS = ("stream_id", "task_id", "op_name", "kernel_name", "hw_type", "task_type", "model_id", "start_ns",
              "end_ns", "thread", "batch_id", "last_ts", "call_begin", "call_seq")

    def __init__(self, report, selection: Selection, host: CannHostSource):
        super().__init__(report, selection, host)
        self.formats = (_formats(_TASK, self.pid, cann=True)[1], _formats(_START, self.pid, host.pid)[1],
                        _formats(_END, self.pid)[1])
        self.kept = Kept(report)

    def batches(self, window=None) -> Iterator[list]:
        report, time = self.report, self.time
        conditions, args = tasks.where(report, self.selection)
        communication = self.selection.everything and report.communication_ops
        query = tasks.task_query(report, self.FIELDS + (("ge",) if communication else ()), span=window_span(window),
                                 within=self.selection)
        name = communication_rows.task_name(report, TASK_NAME_SQL) if communication else TASK_NAME_SQL
        # (a communication task has no flow of its own: CommunicationSource draws the reference's)
        track = time.host_ns_sql('last_ts')
        track = f"CASE WHEN {communication_rows.is_task()} THEN NULL ELSE {track} END" if communication else track
        sql = (f"SELECT stream_id, task_id, {name}, task_type, coalesce(model_id, {UNKNOWN_MODEL}),"
               f" {EPOCH_NS('start_ns')}, {EPOCH_NS('end_ns')}, end_ns - start_ns, thread,"
               f" {track}, {time.host_ns_sql('call_begin')}, coalesce(batch_id, 0), call_seq"
               f" FROM ({query}) q WHERE {conditions}")
        return batches(report.conn.execute(sql, args))

    def start(self, row) -> int:
        return row[5]

    def write(self, rows: list, out, lanes) -> Optional[list]:
        names, host, kept, ids = self.names, self.host, self.kept, self.host.ids
        place, room, pid, device = lanes.place, out.room, self.pid, self.device
        fmt_task, fmt_start, fmt_end = self.formats
        threads, index = out.threads, out.slice_index
        events: List[str] = []
        count = 0
        pending = iter(rows)
        for row in pending:
            stream, task_id, name, task_type, model_id, start, end, duration, thread, track, call, batch, seq = row
            if end < start:
                self.backwards += 1
                continue
            if count + 3 > room and count:      # (a task and its flow in one file: the rest for the next)
                out.add("".join(events), count)
                return [row, *pending]
            tid = None
            if not kept.event(start, end) and (pid, stream) not in threads:
                # (the reference names the threads of the streams before it filters the tasks)
                out.use(pid, stream, self.process, _Thread(f"Stream {stream}", stream))
            elif kept.event(start, end):
                lane = place(stream, stream, "Stream", stream, start, end)
                tid = lane.tid
                if (pid, tid) not in threads:
                    out.use(pid, tid, self.process, lane)
                events.append(fmt_task % (tid, us_text(start), repr(duration / 1000), names[name], model_id,
                                          names[task_type], stream, task_id, batch, ids(seq)))
                count += 1
            # (a flow shares its file with its launch's node call, written or not: the reference draws one from a
            # launch without such a call too, and from a call in another file of a timeline cut in slices)
            host_tid = host.lane_of_call(thread, call, index) if track is not None and call is not None else None
            if host_tid is None:
                continue
            flow_id = (device << 80) | (stream << 64) | (task_id << 48) | (batch << 32) | NO_CONTEXT
            events.append(fmt_start % (flow_id, flow_id, host_tid, us_text(track)))
            count += 1
            if tid is not None and kept.event(start, start):
                events.append(fmt_end % (flow_id, flow_id, tid, us_text(start)))
                count += 1
                self.flows += 1
        out.add("".join(events), count)
        return None


class _Thread(NamedTuple):
    """A thread as trace.Writer names it (a Lane's name and sort index: None, no thread_sort_index)."""

    name: str
    sort: Optional[int]


class OverlapSource(EventSource):
    """The "Overlap Analysis" of a device (ecosystem-target.md §2.7): the union of its tasks' intervals, merged
    where they touch or overlap ("Computing", tid 0), and the gaps between them ("Free", tid 3), in start
    order: one pass over the tasks, one section in memory. Every task counts; the sections the time filter
    leaves (``Kept``) are written."""

    noun, owner = "overlap section", "section kind"

    def __init__(self, report, selection: Selection, before: int = 0):
        self.report, self.selection = report, selection
        device = device_number(report)
        # (the reference numbers the processes it has no place for in the order it writes them: ``before``,
        # those before this one)
        process = (CANN_OVERLAP[0], CANN_OVERLAP[1] + before)
        self.pid = cann_pid(_host_pid(report), process, device)
        self.process = cann_process(process, device)
        self.formats = _formats(_OVERLAP, self.pid, cann=True)
        self.lanes = {tid: _Thread(name, None) for tid, name in OVERLAP_THREADS.items()}
        self.kept = Kept(report)

    def batches(self, window=None) -> Iterator[list]:
        conditions, args = tasks.where(self.report, self.selection)
        # (with communication ops, one walk over the whole run: the first half of a split timeline has it; without,
        # each half its own sections: one may be cut at the split)
        communication = self.selection.everything and self.report.communication_ops
        if communication and window is not None and window[0] == 1:
            return iter(())
        query = tasks.task_query(self.report, ("start_ns", "end_ns", "model_id", "iteration", "ge"),
                                 span="" if communication else window_span(window), within=self.selection)
        # (the reference's computing: the GE tasks, not the communication ops' tasks)
        sql = (f"SELECT {EPOCH_NS('start_ns')}, {EPOCH_NS('end_ns')} FROM ({query})"
               f" WHERE {conditions}" + (" AND ge = 1" if communication else ""))
        sections = self._sections(self.report.conn.execute(sql, args))
        if communication:
            sections = family_trace.with_communication((s[1:] for s in sections if s[0] == 0),
                                                       family_trace.communication_sections(self.report),
                                                       family_trace.task_bounds(self.report))
        kept = (s for s in sections if self.kept.event(*s[1:]))
        return iter(lambda: list(itertools.islice(kept, FETCH_ROWS)), [])

    @staticmethod
    def _sections(rows) -> Iterator[tuple]:
        """(tid, start, end) of each section, in start order, from the tasks' (start, end) in start order."""
        first = end = None
        for start, stop in rows:
            if stop < start:
                continue
            if first is None:
                first, end = start, stop
            elif start <= end:
                end = max(end, stop)
            else:
                yield 0, first, end
                yield 3, end, start
                first, end = start, stop
        if first is not None:
            yield 0, first, end

    def start(self, row) -> int:
        return row[1]

    def write(self, rows: list, out, lanes) -> Optional[list]:
        fmt, _fmt_any = self.formats
        if (self.pid, 0) not in out.threads:          # (every thread named, as by the reference)
            for tid, lane in self.lanes.items():
                out.use(self.pid, tid, self.process, lane)
        events = []
        for k, (tid, start, end) in enumerate(rows):
            if len(events) >= out.room:
                out.add("".join(events), len(events))
                return rows[k:]
            d = end - start
            events.append(fmt % (tid, start // 1000, start % 1000, d // 1000, d % 1000, jstr(OVERLAP_THREADS[tid])))
        out.add("".join(events), len(events))
        return None


class FreqSource(EventSource):
    """The "AI Core Freq" of a device (ecosystem-target.md §2.6): msprof reads no frequency log, so, as the
    reference without one, info.json's aic_frequency from the device's sync instant, repeated every
    FREQ_STEP_US (the reference's filling, its float texts) and once more at collectionTimeEnd (as written);
    the samples before the collection began left out (the time filter)."""

    noun, owner = "frequency sample", "process"

    def __init__(self, report):
        device = device_number(report)
        self.report = report
        self.pid = cann_pid(_host_pid(report), CANN_FREQ, device)
        self.process = cann_process(CANN_FREQ, device)
        self.format = _FREQ.replace("<PID>", str(self.pid))
        self.mhz = repr(float(report.aic_mhz) * 1e6 / 1e6)       # (Hz, then MHz: the reference's floats)
        self.kept = Kept(report)

    def batches(self, window=None) -> Iterator[list]:
        if window is not None and window[0] == 1:     # (a handful of events: the first half has them)
            return iter(())
        return iter([[(ns, text) for ns, text in self._samples() if self.kept.event(ns, ns)]])

    def _samples(self) -> list:
        """(epoch ns, ts text) of each sample."""
        time, clock = self.report.time, self.report.clock
        ns = time.device_ns(int(clock.get("dev_cntvct") or 0))
        first = (Decimal(repr(ns)) / 1000 + Decimal(repr(time.offset_us))).quantize(Decimal("0.001"), ROUND_HALF_EVEN)
        texts = [str(first)]
        end = clock.get("collection_end") or str(first + 1)
        begin, stop = float(texts[0]), float(end)
        if stop - begin > FREQ_STEP_US:
            filled = min(int((stop - begin) // FREQ_STEP_US), int((stop - 1 - begin) // FREQ_STEP_US))
            texts += [str(begin + k * FREQ_STEP_US) for k in range(1, filled + 1)]
        return [(int(Decimal(text) * 1000), text) for text in texts + [end]]

    def start(self, row) -> int:
        return row[0]

    def write(self, rows: list, out, lanes) -> Optional[list]:
        out.use(self.pid, 0, self.process, None)        # (a handful of events: beyond the file's room, if need be)
        out.add("".join(self.format % (text, self.mhz) for _ns, text in rows), len(rows))
        return None
