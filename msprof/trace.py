"""The one Chrome-trace writer of every layout (outputs.md §2, docs/timeline.md).

A layout's report describes its timelines (``Timeline``: a base file name, otherData, and the event
``Source``s that fill it); this module writes them:

* **merging** — a timeline's sources are each in start order; the first (the largest) drives, and before
  each of its batches the others are drained up to that batch's last start, so every thread's events are
  in time order in the file (what the checker reads in one pass) without sorting all events together;
* **lanes** — a slice that partially overlaps an open slice of its thread goes to an "(overlap)" lane
  (``Lanes``): nothing dropped, nothing moved in time;
* **slices** — above ``SLICE_EVENTS`` events a timeline is split into ``…_slice_<k>.json`` files, each
  valid on its own; a flow and the slices it binds to are written as one group (``reserve``) so they
  share a file;
* **checks and atomicity** — each file is written to a temporary, checked (msprof.tracecheck) and renamed
  into place; large slices get their metadata written into room left before the body instead of a copy.

A second large timeline (a JOB's ACL calls) is written by a child process while this one writes the first.
"""
import contextlib
import itertools
import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Hashable, Iterator, List, Optional, Tuple

from msprof import __version__, progress
from msprof.outputs import atomic_path, naming_errors, output_dir, remove_stale, temporary
from msprof.console import log
from msprof.layouts.base import Selection
from msprof.tracecheck import TraceError, check_trace
from msprof.workers import process_pool, several_cores, stop

# A timeline with more events (metadata not counted) is split into slices of at most this many, and a slice whose
# events reach SLICE_BYTES is finished at the end of the batch being written (events with long names: 1M of them
# can make more than 200 MB, beyond what viewers load), so that no file is over ~SLICE_BYTES + a batch.
SLICE_EVENTS = 1_000_000
SLICE_BYTES = 190_000_000
# Check written files with tracecheck before they are renamed into place: every file, or (the default)
# slices of at most CHECK_MAX_EVENTS events. Re-reading costs 1.4-4 µs an event (a 250k-event file of
# host calls and flows 1.1 s, as long as writing it); the writers build each event from a fixed template
# and put slices on lanes where they nest, and the tests check every file they export. ``export timeline
# --check`` checks every file.
CHECK_FILES = True
CHECK_MAX_EVENTS = 100_000
# Room left at the start of each slice file for its header and metadata (about 200 bytes per thread),
# and the size from which a slice is finished in place instead of being rewritten with a copy of its
# body: the line of spaces left in such a file is then at most 0.4 % of it.
HEAD_ROOM = 1 << 16
IN_PLACE_MIN_BYTES = 1 << 24
# With a second timeline of at least this many events (and a second core), a child process writes it.
PARALLEL_MIN_EVENTS = 100_000
# Synthetic ids, above what Linux hands out (pid_max <= 2^22), so they never clash with real pids/tids.
TASK_PID_BASE = 1 << 22
LANE_TID_BASE = 1 << 24
FLOW_CATEGORY = "HostToDevice"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Rows per fetch (and per write of formatted events): few enough that the row tuples and event strings
# of one batch are freed and reused by the next; with 8192 the allocator returns its arenas to the OS
# and faults them in again for every batch (0.3 s per 1M rows).
FETCH_ROWS = 1024


def sorted_query(conn, sql: str, args=(), cache_mb: int = 128):
    """A cursor over ``sql``, whose ORDER BY sorts a whole table. SQLite sorts in runs of the cache size
    (2 MB by default), spilled to a temporary file and merged; with room for 128 MB, 1M task or ACL rows
    (~75 MB) are sorted in memory at once (0.2-1 s less per 1M rows; a JOB's 1M-task timeline 3.2 s against
    3.4 s with 32 MB, at 164 MB of RSS against 99 MB). The sort is done by the first step, inside execute(),
    so the connection's setting can be restored right after."""
    (cache_size,) = conn.execute("PRAGMA cache_size").fetchone()
    conn.execute(f"PRAGMA cache_size = -{int(cache_mb) * 1024}")
    try:
        return conn.execute(sql, args)
    finally:
        conn.execute(f"PRAGMA cache_size = {int(cache_size)}")


def batches(cursor):
    """Rows of ``cursor`` in lists of FETCH_ROWS (fewer Python↔SQLite round trips than row by row)."""
    while True:
        rows = cursor.fetchmany(FETCH_ROWS)
        if not rows:
            return
        yield rows


NA_JSON = '"N/A"'     # N/A as a JSON value in an event; tables.NA is the plain text


# Event times: whole ns printed as µs with three decimals. An event format writes ``%U`` for a time; ``us_formats``
# makes two formats of it: one printing a time from (ns // 1000, ns % 1000), one from its text (``us_text``), for
# times that may be negative (``%d.%03d`` cannot print -0.5). Printing the parts costs a third less than repr() of
# ns / 1000 (0.7 against 1.0 µs an event; 1M-event slices have two or three times each), and a JSON reader gets the
# same number: the double nearest to the exact thousandths.
def us_formats(template: str) -> Tuple[str, str]:
    return template.replace("%U", "%d.%03d"), template.replace("%U", "%s")


def us_text(ns: int) -> str:
    return ("-%d.%03d" if ns < 0 else "%d.%03d") % divmod(abs(ns), 1000)


def clean_name(value) -> str:
    """A display name without control characters or unencodable text."""
    text = "" if value is None else str(value)
    text = text.encode("utf-8", "replace").decode("utf-8")
    return _CONTROL.sub("?", text)


def jstr(value) -> str:
    return json.dumps(clean_name(value), ensure_ascii=False)


class JsonNames(dict):
    """name → its JSON string, each distinct name escaped once (bounded: names come from the data)."""

    LIMIT = 100_000

    def __missing__(self, name) -> str:
        text = jstr(name)
        if len(self) < self.LIMIT:
            self[name] = text
        return text


# ---------------------------------------------------------------------------------------------------
# Threads: one per stream / host thread, with extra "(overlap)" lanes for partially overlapping data
# ---------------------------------------------------------------------------------------------------
class Lane:
    __slots__ = ("tid", "name", "sort", "stack", "last", "horizon")

    def __init__(self, tid: int, name: str, sort: int):
        self.tid, self.name, self.sort = tid, name, sort
        self.stack: List[int] = []     # end ns of the open slices
        self.last = None               # start ns of the previous slice
        self.horizon = None            # (first lane only) latest end ns of all slices of its thread so far


class Lanes:
    """Assigns slices (fed in start order) to threads so that slices on a thread nest properly.

    A slice that partially overlaps an open slice of its thread goes to the first "(overlap)" lane
    where it fits (a new lane if none does): nothing is dropped, nothing is moved in time."""

    def __init__(self, tids=None):
        self._lanes: Dict[Hashable, List[Lane]] = {}    # thread key -> its lanes, first lane first
        self._tids = tids if tids is not None else itertools.count(LANE_TID_BASE)   # shared by a file's sources
        self.moved = 0

    def place(self, key: Hashable, tid: int, label: str, sort: int, start: int, end: int) -> Lane:
        """The lane of a slice of thread ``key`` (first lane: ``tid``, named "{label} {tid}"); keys: a
        stream id, (pid, tid) of a host thread, ("acl", pid, tid) of an execute call's thread."""
        lanes = self._lanes.get(key)
        if lanes is None:
            lanes = self._lanes[key] = [Lane(tid, f"{label} {tid}", sort)]
        else:
            first = lanes[0]
            if start >= first.horizon:
                # Every earlier slice of the thread has ended (the usual case): the first lane, whose
                # open slices would all be popped below; other lanes' stacks only hold ended slices too.
                first.stack = [end]
                first.last = start
                first.horizon = end
                return first
            stack = first.stack
            if stack and start >= first.last and start < stack[-1] and end <= stack[-1]:
                # Nested in the innermost open slice of the first lane (a host call inside its caller): what
                # the walk below would find first, without it. (That slice being open, so are those under it;
                # its end bounds ``end``, so the horizon stands.)
                stack.append(end)
                first.last = start
                return first
        first = lanes[0]
        if first.horizon is None or end > first.horizon:
            first.horizon = end
        for lane in lanes:
            if lane.last is not None and start < lane.last:
                continue
            stack = lane.stack
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                lane.last = start
                if lane is not first:
                    self.moved += 1
                return lane
        n = len(lanes)
        name = f"{label} {tid}"
        lane = Lane(next(self._tids), f"{name} (overlap{'' if n == 1 else ' %d' % n})", sort + min(n, 255))
        lane.stack.append(end)
        lane.last = start
        lanes.append(lane)
        self.moved += 1
        return lane


# ---------------------------------------------------------------------------------------------------
# One timeline (base file name): body → slices
# ---------------------------------------------------------------------------------------------------
class Writer:
    """The files of one timeline (base name), written slice by slice.

    A slice's events go straight into its temporary file, after HEAD_ROOM bytes left free for the
    header and metadata (only known once the slice is complete: overlap threads appear on the way).
    A large slice whose metadata fits gets them written into that room, right-aligned behind a line of
    spaces (JSON whitespace), so its body is never copied; any other slice is rewritten with its
    metadata and a copy of the body (cheap for a small one)."""

    def __init__(self, directory: Path, base: str, other: dict, check_all: bool = False, numbered: bool = False):
        self.directory, self.base, self.other = directory, base, other
        self.check_all = check_all
        self.numbered = numbered              # name even a single file "_slice_0" (one of several parts)
        self.count = 0                       # events in the current slice
        self.total = 0
        self.slice_index = 0
        self.processes: Dict[int, str] = {}
        self.threads: Dict[Tuple[int, int], Tuple[str, int]] = {}
        self.written: List[Path] = []
        output_dir(directory)
        self._open_slice()

    def _open_slice(self) -> None:
        self.limit = max(1, int(SLICE_EVENTS))  # events the slice may take (less once it holds SLICE_BYTES)
        self.bytes = 0
        self._path = temporary(self.directory, self.base)
        with naming_errors(self._path):
            fd = os.open(self._path, os.O_WRONLY)
            os.lseek(fd, HEAD_ROOM, os.SEEK_SET)
            self.body = os.fdopen(fd, "w", encoding="utf-8", buffering=1 << 20)

    def write(self, text: str) -> None:
        """Events into the slice (``count`` is the writer's to keep). Once the slice holds SLICE_BYTES, its
        limit is the events it has: the next event starts a new slice."""
        self.body.write(text)
        self.bytes += len(text) if text.isascii() else len(text.encode("utf-8"))
        if self.bytes >= SLICE_BYTES:
            self.limit = max(1, min(self.limit, self.count))

    def reserve(self, n: int) -> None:
        """Make room for a group of n events that must share a file (a flow and its slices)."""
        if self.count and self.count + n > self.limit:
            self._flush(final=False)

    def use(self, pid: int, tid: int, process: str, lane: Lane) -> None:
        if (pid, tid) not in self.threads:
            self.threads[(pid, tid)] = (lane.name, lane.sort)
            self.processes.setdefault(pid, process)

    def _metadata(self) -> Iterator[str]:
        for pid, name in sorted(self.processes.items()):
            yield '{"ph":"M","pid":%d,"tid":0,"name":"process_name","args":{"name":%s}}' % (pid, jstr(name))
        for (pid, tid), (name, sort) in sorted(self.threads.items()):
            yield '{"ph":"M","pid":%d,"tid":%d,"name":"thread_name","args":{"name":%s}}' % (pid, tid, jstr(name))
            yield '{"ph":"M","pid":%d,"tid":%d,"name":"thread_sort_index","args":{"sort_index":%d}}' % (pid, tid, sort)

    def _flush(self, final: bool) -> None:
        with naming_errors(self._target_name(final)):
            self._write_slice(final)

    def _target_name(self, final: bool) -> Path:
        sliced = self.numbered or not final or self.slice_index > 0
        return self.directory / (f"{self.base}_slice_{self.slice_index}.json" if sliced else f"{self.base}.json")

    def _write_slice(self, final: bool) -> None:
        target = self._target_name(final)
        other = dict(self.other)
        if target.name != f"{self.base}.json":
            other["slice"] = self.slice_index
        header = '{"traceEvents":['
        metadata = ",".join("\n" + line for line in self._metadata()).encode()
        self.body.write(_tail(other).decode())
        self.body.close()
        spaces = HEAD_ROOM - len(header) - 1 - len(metadata)
        with atomic_path(target) as tmp:
            if spaces >= 0 and os.path.getsize(self._path) >= IN_PLACE_MIN_BYTES:
                # header line, a line of spaces, the metadata: exactly the room, the body follows
                with open(self._path, "r+b") as out:
                    out.write(header.encode() + b"\n" + b" " * spaces + metadata)
                os.replace(self._path, tmp)         # the slice file is the result
            else:
                with open(tmp, "wb") as out, open(self._path, "rb") as body:
                    out.write(header.encode() + metadata)
                    body.seek(HEAD_ROOM)
                    shutil.copyfileobj(body, out, 1 << 20)
                self._path.unlink()
            if CHECK_FILES and (self.check_all or self.count <= CHECK_MAX_EVENTS):
                problems = check_trace(tmp)
                if problems:
                    raise TraceError(f"internal error: {target.name} breaks the trace rules: "
                                     + "; ".join(problems[:5]))
        self.written.append(target)
        self.total += self.count
        self.slice_index += 1
        self.count = 0
        self.processes, self.threads = {}, {}
        if not final:
            self._open_slice()

    def finish(self) -> List[Path]:
        try:
            self._flush(final=True)
        finally:
            self.close()
        keep = {p.name for p in self.written}
        for stale in [self.directory / f"{self.base}.json"] + list(self.directory.glob(f"{_glob_escape(self.base)}_slice_*.json")):
            if stale.name not in keep and stale.is_file():
                stale.unlink()
        return self.written

    def close(self) -> None:
        """Drop the slice being written (after an error: a full disk must not stay full)."""
        try:
            if not self.body.closed:
                self.body.close()
        except OSError:
            pass                  # the error that brought us here is the one to report
        finally:
            with contextlib.suppress(OSError):
                self._path.unlink()




def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)




# ---------------------------------------------------------------------------------------------------
# What a layout describes, and the driver
# ---------------------------------------------------------------------------------------------------
class Source:
    """Events of one kind, from rows in start order: ``batches()`` yields row lists, ``start(row)`` is a
    row's start (ns, the merge key), and ``write(rows, writer, lanes)`` formats them into the writer.

    A source of a timeline that can be split (``Timeline.split``) also takes ``window`` = (0 or 1, split):
    its rows before (0) or from (1) the split point.

    ``backwards`` counts the rows left out for ending before they start; ``noun`` and ``owner`` name the
    slices and what they sit on in the warnings (``overlap_level``: how loud an overlap is, a warning where
    the data are corrupt)."""

    noun, owner = "event", "thread"
    overlap_level = logging.WARNING
    backwards = 0

    def batches(self, window=None) -> Iterator[list]:
        raise NotImplementedError

    def start(self, row) -> int:
        raise NotImplementedError

    def write(self, rows: list, writer: "Writer", lanes: Lanes) -> None:
        raise NotImplementedError

    def finish(self, base: str, lanes: Lanes) -> None:
        """After the last row: warnings about what was left out or moved to overlap lanes (``base``: the
        timeline's name)."""
        if self.backwards:
            log.warning("%s: %d %s(s) end before they start (corrupt data): left out of the timeline",
                        base, self.backwards, self.noun)
        if lanes.moved:
            log.log(self.overlap_level, "%s: %d %s(s) partially overlap another of their %s: shown on "
                    "'(overlap)' threads", base, lanes.moved, self.noun, self.owner)


@dataclass
class Timeline:
    """One timeline (its files share ``base``): otherData and a factory of its sources (given the report;
    the first source drives the merge). ``events``: about how many events it holds. ``split``: when the
    timeline can be written in two halves by two processes, gives the split point (of the sources' own
    choosing: a value each source's window understands) for a report, or None."""

    base: str
    other: dict
    sources: Callable[..., List[Source]]
    events: int = 0
    split: Optional[Callable] = None


def write_timeline(report, timeline: Timeline, directory: Path, check_all: bool = False, window=None,
                   base: Optional[str] = None) -> List[Path]:
    """Write one timeline's files (``window``: one half of a split timeline, written as numbered slices
    under ``base``); return them."""
    writer = Writer(directory, base or timeline.base, timeline.other, check_all, numbered=window is not None)
    tids = itertools.count(LANE_TID_BASE)
    sources = []
    try:
        sources = [(source, Lanes(tids)) for source in timeline.sources(report)]
        events = timeline.events // (2 if window is not None else 1)
        with progress.step(f"writing {writer.base}", events or None, "events") as shown:
            if sources:
                _merge(sources, writer, window, shown)
        written = writer.finish()
    except BaseException:
        writer.close()
        raise
    for source, lanes in sources:
        source.finish(timeline.base, lanes)
    log.info("%s: %d event(s), %d file(s)", timeline.base, writer.total, len(written))
    return written


def _merge(sources: List[Tuple[Source, Lanes]], writer: "Writer", window, shown: progress.Step) -> None:
    (primary, lanes), others = sources[0], [_Drain(*s, window) for s in sources[1:]]
    for rows in (primary.batches(window) if window is not None else primary.batches()):
        until = primary.start(rows[-1])
        for other in others:
            other.write_until(until, writer)
        primary.write(rows, writer, lanes)
        shown.advance(len(rows))
    for other in others:
        other.write_until(None, writer)


class _Drain:
    """A secondary source, written up to a time at each step of the merge."""

    def __init__(self, source: Source, lanes: Lanes, window=None):
        self.source, self.lanes = source, lanes
        self.pending = iter(source.batches(window) if window is not None else source.batches())
        self.rows: list = []

    def write_until(self, until: Optional[int], writer: "Writer") -> None:
        start, lanes = self.source.start, self.lanes
        while True:
            if not self.rows:
                self.rows = next(self.pending, None) or []
                if not self.rows:
                    return
            if until is None or start(self.rows[-1]) <= until:
                self.source.write(self.rows, writer, lanes)
                self.rows = []
                continue
            cut = next(i for i, row in enumerate(self.rows) if start(row) > until)
            if cut:
                self.source.write(self.rows[:cut], writer, lanes)
                self.rows = self.rows[cut:]
            return


def write_timelines(report, selection: Selection = Selection(), check_all: bool = False,
                    timelines: Optional[list] = None) -> List[Path]:
    """Write every timeline of a unit into <unit>/timeline/; return the files, in the order the layout
    lists its timelines (``timelines``: the layout's list, when the caller has it: making it says what is
    skipped, once). With a second core, a second timeline of PARALLEL_MIN_EVENTS or more is written by
    a child process; a single timeline of more than SLICE_EVENTS that can be split is written in two
    halves (the child writes the second), its slices numbered in time order."""
    report.check(selection)
    if timelines is None:
        timelines = report.unit.layout.timelines(report, selection)
    directory = report.unit.out / "timeline"
    child = split = None
    if len(timelines) > 1 and several_cores():
        big = sorted(range(len(timelines)), key=lambda i: -timelines[i].events)
        if timelines[big[1]].events >= PARALLEL_MIN_EVENTS:
            child = big[1]
    elif len(timelines) == 1 and timelines[0].split and timelines[0].events > SLICE_EVENTS and several_cores():
        split = timelines[0].split(report)
    written: Dict[int, List[Path]] = {}
    executor = future = None
    if child is not None or split is not None:
        executor = process_pool(1)
        args = (report.unit, selection, child if split is None else 0, str(directory), (SLICE_EVENTS, SLICE_BYTES),
                CHECK_FILES, CHECK_MAX_EVENTS, check_all, None if split is None else (1, split))
        future = executor.submit(_in_child, *args)
    try:
        for i, timeline in enumerate(timelines):
            if i != child:
                written[i] = write_timeline(report, timeline, directory, check_all,
                                            None if split is None else (0, split))
        if future is not None:
            with progress.step("writing timelines (second process)") as shown:
                progress.wait([future], shown)
            paths, messages = future.result()
            for level, message in messages:
                log.log(level, "%s", message)
            if split is None:
                written[child] = [Path(p) for p in paths]
            else:
                written[0] += _renumber(timelines[0], [Path(p) for p in paths], len(written[0]))
    except BaseException:
        if executor is not None:
            stop(executor)
            remove_stale(directory)         # what the stopped child was writing
        raise
    if executor is not None:
        executor.shutdown(wait=True)
    files = [path for i in range(len(timelines)) for path in written.get(i, [])]
    for path in files:
        log.info("wrote %s", path)
    return files


def _renumber(timeline: Timeline, paths: List[Path], first: int) -> List[Path]:
    """The second half's slices (written as ``<base>.part_slice_<k>.json``) renamed to follow the first
    half's, their otherData "slice" rewritten: only the file's last line changes."""
    out = []
    for k, path in enumerate(paths):
        old = _tail(dict(timeline.other, slice=k))
        new = _tail(dict(timeline.other, slice=first + k))
        with open(path, "r+b") as handle:
            handle.seek(-len(old), os.SEEK_END)
            if handle.read() != old:
                raise TraceError(f"internal error: {path.name} does not end with its otherData")
            handle.seek(-len(old), os.SEEK_END)
            handle.write(new)
            handle.truncate()
        target = path.with_name(f"{timeline.base}_slice_{first + k}.json")
        os.replace(path, target)
        out.append(target)
    return out


def _tail(other: dict) -> bytes:
    """The last line of a timeline file (as Writer._flush writes it)."""
    return ('\n],"displayTimeUnit":"ms","otherData":' + json.dumps(other, ensure_ascii=False, sort_keys=True)
            + "}\n").encode()


def _in_child(unit, selection, index: int, directory: str, slice_limits: Tuple[int, int], check_files: bool,
              check_max_events: int, check_all: bool, window=None):
    """One timeline (or, with ``window``, its second half) written in a child process: (paths, [(log
    level, message)])."""
    global SLICE_EVENTS, SLICE_BYTES, CHECK_FILES, CHECK_MAX_EVENTS
    (SLICE_EVENTS, SLICE_BYTES), CHECK_FILES, CHECK_MAX_EVENTS = slice_limits, check_files, check_max_events
    messages: List[Tuple[int, str]] = []
    handler = _ListHandler(messages)
    log.addHandler(handler)
    try:
        report = unit.open()
        try:
            timeline = unit.layout.timelines(report, selection)[index]
            base = None if window is None else timeline.base + ".part"
            written = write_timeline(report, timeline, Path(directory), check_all, window, base)
        finally:
            report.close()
    finally:
        log.removeHandler(handler)
    return [str(p) for p in written], messages


class _ListHandler(logging.Handler):
    """Collects a child's warnings for the parent to log (the child's stderr is not the user's view)."""

    def __init__(self, messages: list):
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record) -> None:
        self.messages.append((record.levelno, record.getMessage()))


def timelines_current(report, timelines: Optional[list] = None) -> bool:
    """True when every timeline file of a full export (``timelines``: the layout's, of the whole run) exists
    and is newer than the database."""
    if timelines is None:
        timelines = report.unit.layout.timelines(report, Selection())
    try:
        db_mtime = report.unit.database.path.stat().st_mtime_ns
    except OSError:
        return False
    directory = report.unit.out / "timeline"
    for timeline in timelines:
        candidates = [directory / f"{timeline.base}.json", directory / f"{timeline.base}_slice_0.json"]
        mtimes = [p.stat().st_mtime_ns for p in candidates if p.is_file()]
        if not mtimes or max(mtimes) < db_mtime:
            return False
        path = candidates[0] if candidates[0].is_file() else candidates[1]
        if _other_data(path).get("iteration") is not None:
            return False          # a --model-id/--iteration-id export holds one iteration only
    return True


def _other_data(path: Path) -> dict:
    """otherData of a timeline file, from its last line (cheap: no need to read the events)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            tail = handle.read().decode("utf-8", "replace").rstrip().rsplit("\n", 1)[-1]
        return json.loads('{"traceEvents":[' + tail).get("otherData") or {}
    except (OSError, ValueError, AttributeError):
        return {}



def other_data(report, kind: str, model: Optional[dict], iteration_id=None) -> dict:
    """otherData of a unit's timeline file."""
    begin = report.clock.get("collection_begin_us") or 0
    return {
        "collectionTimeBegin": int(begin) if float(begin).is_integer() else begin,
        "deviceId": report.device_id,
        "file": kind,
        "model": None if model is None else {"modelId": model["model_id"], "modelName": model["model_name"],
                                              "batchNum": model["batch_num"]},
        "iteration": iteration_id,
        "msprofVersion": __version__,
        "timeUnit": "us",
    }


def device_number(report) -> int:
    try:
        return max(0, min(int(report.device_id), 4095))
    except (TypeError, ValueError):
        return 0
