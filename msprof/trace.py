"""The one Chrome-trace writer of every layout (outputs.md §2, docs/timeline.md).

A layout's report describes its timelines (``Timeline``: a base file name, otherData, and the event
``EventSource``s that fill it: msprof.contract); this module writes them:

* **merging** — a timeline's sources are each in start order; the first (the largest) drives, and before
  each of its batches the others are drained up to that batch's last start, so every thread's events are
  in time order in the file (what the checker reads in one pass) without sorting all events together;
* **lanes** — a slice that partially overlaps an open slice of its thread goes to an "(overlap)" lane
  (``Lanes``): nothing dropped, nothing moved in time;
* **slices** — above ``SLICE_EVENTS`` events a timeline is split into ``…_slice_<k>.json`` files, each
  valid on its own: a source fills the file being written while it has ``room`` and hands back the rest of
  its batch, which the writer puts in a new file (``Writer.put``); a flow and the slices it binds to go into
  one file;
* **checks and atomicity** — each file is written to a temporary and checked (msprof.tracecheck); the files
  of a unit's timelines replace the earlier ones together, or not at all (msprof.outputs.FileSet); large slices get their metadata written into room left before the
  body instead of a copy.

A second large timeline (a JOB's ACL calls) is written by a child process while this one writes the first.
"""
import contextlib
import itertools
import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any, Dict, Hashable, Iterator, List, Optional, Tuple

from msprof import progress
from msprof.console import log
from msprof.contract import EventSource, Selection, Timeline
from msprof.events import jstr
from msprof.outputs import FileSet, naming_errors, output_dir, remove_stale, temporary
from msprof.tracecheck import TraceError, check_trace
from msprof.workers import Pool, several_cores

# A timeline with more events (metadata not counted) is split into slices of at most this many, and a slice whose
# events reach SLICE_BYTES is finished at the end of the batch being written (events with long names: 1M of them
# can make more than 200 MB, beyond what viewers load), so that no file is over ~SLICE_BYTES + a batch.
SLICE_EVENTS = 1_000_000
SLICE_BYTES = 190_000_000
# Check written files with tracecheck before they are renamed into place: every file, or (the default)
# slices of at most CHECK_MAX_EVENTS events. Re-reading a file costs about as long as writing it; the
# writers build each event from a fixed template
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
# Overlap lanes' tids: above what Linux hands out (pid_max <= 2^22), and above the synthetic pids
# (msprof.events.TASK_PID_BASE), so they never clash with real pids/tids.
LANE_TID_BASE = 1 << 24
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

    def __init__(self, directory: Path, base: str, other: Optional[dict], files: FileSet,
                 check_all: Optional[bool] = False, numbered: bool = False, whole: bool = False):
        self.directory, self.base, self.other = directory, base, other
        self.whole = whole                   # never cut in slices (Timeline.whole)
        self.files = files                   # the set its slices are staged in (its caller commits it)
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
        # events the slice may take (less once it holds SLICE_BYTES)
        self.limit = max(1, int(SLICE_EVENTS)) if not self.whole else 1 << 62
        self.bytes = 0
        self._path = temporary(self.directory, self.base)
        with naming_errors(self._path):
            fd = os.open(self._path, os.O_WRONLY)
            os.lseek(fd, HEAD_ROOM, os.SEEK_SET)
            self.body = os.fdopen(fd, "w", encoding="utf-8", buffering=1 << 20)

    # --- what an event source sees of the file being written (msprof.contract.EventSource.write) ----------
    @property
    def room(self) -> int:
        """Events the file being written can still take."""
        return self.limit - self.count

    @property
    def empty(self) -> bool:
        return self.count == 0

    def add(self, text: str, events: int) -> None:
        """``events`` events (their text) into the file. Once it holds SLICE_BYTES it has no more room: the next
        event starts a new file."""
        try:
            self.body.write(text)
        except OSError:
            with naming_errors(self._target_name(final=True)):       # (a full disk: the file named)
                raise
        self.count += events
        self.bytes += len(text) if text.isascii() else len(text.encode("utf-8"))
        if self.bytes >= SLICE_BYTES and not self.whole:
            self.limit = max(1, min(self.limit, self.count))

    def use(self, pid: int, tid: int, process, lane: Optional[Lane]) -> None:
        """Name thread (pid, tid) of ``lane`` in the file (its metadata), where the source sees it first (no
        ``lane``: the process only)."""
        if lane is not None and (pid, tid) not in self.threads:
            self.threads[(pid, tid)] = (lane.name, lane.sort)
        self.processes.setdefault(pid, process)

    def put(self, source: EventSource, rows: list, lanes: Lanes) -> None:
        """A batch of a source's rows into the files: the source fills the file being written while it has room
        and hands back the rows it could not take, which go on in a new file."""
        while rows:
            rest = source.write(rows, self, lanes)
            if not rest:
                return
            if self.empty:      # (a source takes at least one row into an empty file: else it would never end)
                raise TraceError(f"internal error: {self.base}: an event source wrote nothing into an empty file")
            self._flush(final=False)
            rows = rest

    def _metadata(self) -> Iterator[str]:
        for pid, process in sorted(self.processes.items()):
            # (a process is its name, or the CANN layout's (name, labels, sort index): EventSource.write)
            name, labels, sort = process if isinstance(process, tuple) else (process, None, None)
            yield '{"ph":"M","pid":%d,"tid":0,"name":"process_name","args":{"name":%s}}' % (pid, jstr(name))
            if labels is not None:
                yield '{"ph":"M","pid":%d,"tid":0,"name":"process_labels","args":{"labels":%s}}' % (pid, jstr(labels))
                yield '{"ph":"M","pid":%d,"tid":0,"name":"process_sort_index","args":{"sort_index":%d}}' % (pid, sort)
        for (pid, tid), (name, sort) in sorted(self.threads.items()):
            yield '{"ph":"M","pid":%d,"tid":%d,"name":"thread_name","args":{"name":%s}}' % (pid, tid, jstr(name))
            if sort is not None:          # (the CANN layout's Overlap Analysis threads have none)
                yield '{"ph":"M","pid":%d,"tid":%d,"name":"thread_sort_index","args":{"sort_index":%d}}' % (
                    pid, tid, sort)

    def _flush(self, final: bool) -> None:
        with naming_errors(self._target_name(final)):
            self._write_slice(final)

    def _target_name(self, final: bool) -> Path:
        sliced = self.numbered or not final or self.slice_index > 0
        return self.directory / (f"{self.base}_slice_{self.slice_index}.json" if sliced else f"{self.base}.json")

    def _write_slice(self, final: bool) -> None:
        target = self._target_name(final)
        other = None if self.other is None else dict(self.other)
        if other is not None and target.name != f"{self.base}.json":
            other["slice"] = self.slice_index
        header = '{"traceEvents":[' if other is not None else "["
        metadata = ",".join("\n" + line for line in self._metadata()).encode()
        self.body.write(_tail(other).decode())
        self.body.close()
        spaces = HEAD_ROOM - len(header) - 1 - len(metadata)
        with self.files.staging(target.name) as tmp:         # (in place when the set is committed)
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
            if CHECK_FILES and self.check_all is not None and (self.check_all or self.count <= CHECK_MAX_EVENTS):
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


# ---------------------------------------------------------------------------------------------------
# The driver: a layout's timelines (msprof.contract.Timeline) written
# ---------------------------------------------------------------------------------------------------
def write_timeline(report, timeline: Timeline, directory: Path, check_all: Optional[bool] = False, window=None,
                   base: Optional[str] = None, files: Optional[FileSet] = None) -> List[Path]:
    """Write one timeline's files (``window``: one half of a split timeline, written as numbered slices
    under ``base``); return them. ``files``: the set they are staged in, which the caller commits (without
    one, they are put in place at the end)."""
    own = files is None
    files = FileSet(directory) if own else files
    writer = Writer(directory, base or timeline.base, timeline.other, files, check_all, numbered=window is not None,
                    whole=timeline.whole)
    tids = itertools.count(LANE_TID_BASE)
    sources = []
    try:
        sources = [(source, Lanes(tids)) for source in timeline.sources(report)]
        events = timeline.events // (2 if window is not None else 1)
        with progress.step(f"writing {writer.base}", events or None, "events") as shown:
            if sources:
                _merge(sources, writer, window, shown)
        written = writer.finish()
        if own:
            files.commit()
    except BaseException:
        writer.close()
        if own:
            files.discard()
        raise
    for source, lanes in sources:
        source.finish(timeline.base, lanes)
    log.info("%s: %d event(s), %d file(s)", timeline.base, writer.total, len(written))
    return written


def _merge(sources: List[Tuple[EventSource, Lanes]], writer: "Writer", window, shown: progress.Step) -> None:
    (primary, lanes), others = sources[0], [_Drain(*s, window) for s in sources[1:]]
    for rows in (primary.batches(window) if window is not None else primary.batches()):
        until = primary.start(rows[-1])
        for other in others:
            other.write_until(until, writer)
        writer.put(primary, rows, lanes)
        # (every event written counts: the other sources' and the flows too, as the step's total does)
        shown.advance(writer.total + writer.count - shown.done)
    for other in others:
        other.write_until(None, writer)
    shown.advance(writer.total + writer.count - shown.done)


class _Drain:
    """A secondary source, written up to a time at each step of the merge."""

    def __init__(self, source: EventSource, lanes: Lanes, window=None):
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
                writer.put(self.source, self.rows, lanes)
                self.rows = []
                continue
            cut = next(i for i, row in enumerate(self.rows) if start(row) > until)
            if cut:
                writer.put(self.source, self.rows[:cut], lanes)
                self.rows = self.rows[cut:]
            return


def write_timelines(report, timelines: List[Timeline], directory: Path, check_all: Optional[bool] = False,
                    selection: Selection = Selection(), files: Optional[FileSet] = None) -> List[Path]:
    """Write a unit's timelines (its layout's list) into ``directory``; return the files, in the order of the
    list. With a second core, a second timeline of PARALLEL_MIN_EVENTS or more is written by a child
    process; a single timeline of more than SLICE_EVENTS that can be split is written in two halves (the
    child writes the second), its slices numbered in time order. ``files``: a set to stage them in, which
    the caller commits (msprof.merged: a PROF_'s devices in one file, checked there: ``check_all`` None
    checks none of the files here); else they are put in place here."""
    child, split = _second_process(report, timelines)
    written: Dict[int, List[Path]] = {}
    # (the set of every file of the unit's timelines: each replaced when all are written, or none)
    staged = files if files is not None else FileSet(
        directory, report.unit.database.path.parent / "timeline.manifest", _names_of(timelines),
        whole=selection.everything)
    with staged if files is None else contextlib.nullcontext():
        if child is None:
            for i, timeline in enumerate(timelines):
                written[i] = write_timeline(report, timeline, directory, check_all, files=staged)
        else:
            with Pool(1, on_stop=lambda: remove_stale(directory)) as pool:     # (what a stopped child was writing)
                args = (report.unit, timelines[child], str(directory), (SLICE_EVENTS, SLICE_BYTES), CHECK_FILES,
                        CHECK_MAX_EVENTS, check_all, None if split is None else (1, split))
                future = pool.submit(_in_child, *args)
                for i, timeline in enumerate(timelines):
                    if i != child or split is not None:
                        written[i] = write_timeline(report, timeline, directory, check_all,
                                                    None if split is None else (0, split), files=staged)
                [(pairs, messages)] = pool.results("writing timelines (second process)", [future])
            for level, message in messages:
                log.log(level, "%s", message)
            if split is None:
                written[child] = [directory / name for _tmp, name in pairs]
            else:
                pairs = _renumber(timelines[0], pairs, len(written[0]))
                written[0] += [directory / name for _tmp, name in pairs]
            staged.adopt(pairs)
        if files is None:
            staged.commit()
    made = [path for i in range(len(timelines)) for path in written.get(i, [])]
    for path in made if files is None else ():
        log.info("wrote %s", path)
    return made


def _second_process(report, timelines: List[Timeline]) -> Tuple[Optional[int], Any]:
    """(the timeline a child process writes, the point it is split at when the child writes its second half),
    or (None, None) when this process writes them all."""
    if not several_cores():
        return None, None
    if len(timelines) > 1:
        second = sorted(range(len(timelines)), key=lambda i: -timelines[i].events)[1]
        return (second, None) if timelines[second].events >= PARALLEL_MIN_EVENTS else (None, None)
    if len(timelines) == 1 and timelines[0].split and timelines[0].events > SLICE_EVENTS:
        split = timelines[0].split(report)
        return (0, split) if split is not None else (None, None)
    return None, None


def _renumber(timeline: Timeline, pairs: List[Tuple[str, str]], first: int) -> List[Tuple[str, str]]:
    """The second half's slices (staged as ``<base>.part_slice_<k>.json``) named to follow the first half's,
    their otherData "slice" rewritten: only the file's last line changes."""
    # (the CANN layout's array, without otherData, says nothing of its slice)
    for k, (path, name) in enumerate(pairs if timeline.other is not None else ()):
        old = _tail(dict(timeline.other, slice=k))
        new = _tail(dict(timeline.other, slice=first + k))
        with open(path, "r+b") as handle:
            handle.seek(-len(old), os.SEEK_END)
            if handle.read() != old:
                raise TraceError(f"internal error: {name} does not end with its otherData")
            handle.seek(-len(old), os.SEEK_END)
            handle.write(new)
            handle.truncate()
    return [(path, f"{timeline.base}_slice_{first + k}.json") for k, (path, _name) in enumerate(pairs)]


def _names_of(timelines: List[Timeline]) -> Optional["re.Pattern"]:
    """The names msprof gives the files of these timelines (one file, slices, the halves' slices of older
    versions): in timeline/, a file of such a name that an export does not write again is an earlier one's."""
    if not timelines:
        return None
    return re.compile("|".join(rf"{re.escape(t.base)}(?:_slice_\d+|\.part_slice_\d+)?\.json" for t in timelines))


def _tail(other: Optional[dict]) -> bytes:
    """The last line of a timeline file (as Writer._flush writes it): the CANN layout's (``other`` None) ends
    its array."""
    if other is None:
        return b"\n]\n"
    return ('\n],"displayTimeUnit":"ms","otherData":' + json.dumps(other, ensure_ascii=False, sort_keys=True)
            + "}\n").encode()


def _in_child(unit, timeline: Timeline, directory: str, slice_limits: Tuple[int, int], check_files: bool,
              check_max_events: int, check_all: bool, window=None):
    """One timeline (or, with ``window``, its second half) written in a child process: its files staged,
    (temporary, name) for the parent to put in place with its own, and [(log level, message)]."""
    global SLICE_EVENTS, SLICE_BYTES, CHECK_FILES, CHECK_MAX_EVENTS
    (SLICE_EVENTS, SLICE_BYTES), CHECK_FILES, CHECK_MAX_EVENTS = slice_limits, check_files, check_max_events
    messages: List[Tuple[int, str]] = []
    handler = _ListHandler(messages)
    log.addHandler(handler)
    files = FileSet(Path(directory))
    try:
        report = unit.open()
        try:
            base = None if window is None else timeline.base + ".part"
            write_timeline(report, timeline, Path(directory), check_all, window, base, files)
        finally:
            report.close()
    except BaseException:
        files.discard()
        raise
    finally:
        log.removeHandler(handler)
    return files.hand_over(), messages


class _ListHandler(logging.Handler):
    """Collects a child's warnings for the parent to log (the child's stderr is not the user's view)."""

    def __init__(self, messages: list):
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record) -> None:
        self.messages.append((record.levelno, record.getMessage()))
