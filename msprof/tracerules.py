"""The trace rules (msprof.tracecheck) checked event by event: ``Checker`` reads events, or the lines of the
one-event-per-line layout msprof.trace writes, and keeps a nesting stack per thread and the flows met, so that
memory does not grow with the events (a thread out of time order is checked again, buffered and sorted)."""
import json
import math
import re
import sys
from typing import Dict, List, Tuple

MAX_FLOW_ID = 2 ** 53
MAX_PROBLEMS = 50          # stop collecting after this many (a broken file would list millions)
_BATCH_LINES = 4096

_NUMBER = (int, float)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_REQUIRED = {
    "M": ("name", "pid", "args"),
    "X": ("name", "ts", "dur", "pid", "tid"),
    "B": ("name", "ts", "pid", "tid"),
    "E": ("ts", "pid", "tid"),
    "i": ("name", "ts", "pid"),
    "I": ("name", "ts", "pid"),
    "C": ("name", "ts", "pid", "args"),
    "s": ("name", "cat", "id", "ts", "pid", "tid"),
    "t": ("name", "cat", "id", "ts", "pid", "tid"),
    "f": ("name", "cat", "id", "ts", "pid", "tid"),
}
_METADATA_NAMES = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index",
                   "thread_sort_index": "sort_index", "process_labels": "labels"}
# Sort order of items of one thread at the same time: slices first (longest first), then flow points.
_SLICE, _POINT = 0, 1


class Unsorted(Exception):
    """A thread's events are not in time order: rerun with per-thread sorting."""


class Problems(list):
    def add(self, message: str) -> None:
        if len(self) < MAX_PROBLEMS:
            self.append(message)
        elif len(self) == MAX_PROBLEMS:
            self.append("... (more problems not listed)")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ns(value: float) -> int:
    return int(round(value * 1000))


def _thread_key(pid: int, tid: int) -> str:
    """Key of a thread: the text between ``"pid":`` and ``,"ts"`` of a fast-path line (see _FAST_LINE)."""
    return f'{pid},"tid":{tid}'


# Fast path of the line layout: an X event line exactly as msprof.trace writes it, ending
# with "},". Everything the checker needs is guaranteed by the pattern itself: valid JSON (strings without
# raw control characters or escapes, numbers without exponent and small enough that float() is exact
# where json would give an int; args a flat object of such strings and numbers), ph X, pid/tid non-negative integers, ts a finite number,
# dur a finite number >= 0, a name without control characters (and without escapes, so nothing to
# decode). Every other line (metadata, flows, other key orders, escaped names, the last event without
# its comma, blank lines) matches the second alternative and takes the full JSON path.
# Possessive quantifiers (Python 3.11+) save the engine its backtracking bookkeeping, about a fifth of
# the matching time; every construct below can match only one way (a string ends at its first quote, a
# number at its first non-digit), so the accepted language is the same with or without them.
_P = "+" if sys.version_info >= (3, 11) else ""
_JSON_STR = rf'"[^"\\\x00-\x1f]*{_P}"'                               # a JSON string without escapes
_JSON_NUMBER = rf'-?{_P}(?:0|[1-9][0-9]*{_P})(?:\.[0-9]+{_P})?{_P}'      # a JSON number without exponent
_JSON_FLAT_OBJECT = (rf'\{{(?:{_JSON_STR}:(?:{_JSON_STR}|{_JSON_NUMBER})'
                     rf'(?:,{_JSON_STR}:(?:{_JSON_STR}|{_JSON_NUMBER}))*{_P})?{_P}\}}')
_FAST_LINE = re.compile(
    r'^(?:\{"ph":"X","pid":((?:0|[1-9][0-9]{0,15}),"tid":(?:0|[1-9][0-9]{0,15})),'
    r'"ts":(-?(?:0|[1-9][0-9]{0,11})(?:\.[0-9]{1,9})?),"dur":((?:0|[1-9][0-9]{0,11})(?:\.[0-9]{1,9})?),'
    rf'"name":"[^"\\\x00-\x1f\x7f-\x9f]*{_P}"(?:,"args":{_JSON_FLAT_OBJECT})?{_P}\}},|(.*))$', re.M)


class _Thread:
    """Slices and flow points of one (pid, tid): a nesting stack, or a buffer when out of order."""

    __slots__ = ("pid", "tid", "stack", "last", "items")

    def __init__(self, pid: int, tid: int, buffered: bool):
        self.pid, self.tid = pid, tid
        self.stack: List[Tuple[int, int, int]] = []     # (start ns, end ns, event index)
        self.last = None                                  # sort key of the previous item
        self.items = [] if buffered else None


class Checker:
    def __init__(self, buffered: bool):
        self.buffered = buffered
        self.problems = Problems()
        self.threads: Dict[str, _Thread] = {}       # by _thread_key(pid, tid)
        self.flows: Dict[tuple, dict] = {}   # (cat, id) -> {"s": (index, ts_ns, name), "f": ...}
        self.seen_other = False
        self.count = 0
        self._names_ok = set()
        # line layout (lines()): index of the next event, lines waiting for the full JSON path
        self.index = 0
        self._pending: List[str] = []
        self._pending_index = 0
        self._last_fast = False              # the last event line was a fast-path line (ends with ',')

    # --- per event ----------------------------------------------------------------------------------
    def events(self, first_index: int, batch: list) -> None:
        """Check a batch of events; the common case (a well-formed X event) takes a fast path."""
        names_ok, threads, isfinite = self._names_ok, self.threads, math.isfinite
        index = first_index
        for event in batch:
            try:
                if event["ph"] == "X":
                    ts, dur, pid, tid = event["ts"], event["dur"], event["pid"], event["tid"]
                    if (event["name"] in names_ok and type(pid) is int and type(tid) is int
                            and type(ts) in _NUMBER and type(dur) in _NUMBER
                            and isfinite(ts) and isfinite(dur) and dur >= 0):
                        self.count += 1
                        self.seen_other = True
                        start = int(round(ts * 1000))
                        key = (start, _SLICE, -(start + int(round(dur * 1000))))
                        thread = threads.get(_thread_key(pid, tid))
                        if thread is not None and thread.items is None and key >= thread.last:
                            thread.last = key
                            self._place(thread, pid, tid, key, index)
                        else:
                            self._item(index, pid, tid, key)
                        index += 1
                        continue
            except (KeyError, TypeError):
                pass
            self.event(index, event)
            index += 1

    def lines(self, text: str) -> None:
        """Check complete event lines of the one-event-per-line layout (``text`` ends with a newline).

        X lines matching _FAST_LINE are checked straight from their text; any other line goes, in order
        and in batches, through the JSON parser and ``events``."""
        body = text[:-1]
        matches = _FAST_LINE.findall(body)
        if len(matches) != body.count("\n") + 1:        # cannot happen; be safe: all lines the full way
            for line in body.split("\n"):
                self._other_line(line)
            return
        threads = self.threads
        index = run_start = self.index              # run_start: first event of the current run of fast lines
        pending = bool(self._pending)
        for key, ts, dur, other in matches:
            if not ts:
                self._end_fast_run(index - run_start)
                self.index = index
                self._other_line(other)
                index = run_start = self.index
                pending = bool(self._pending)
                continue
            if pending:
                self.index = index
                self.flush_pending(final=False)
                index = run_start = self.index
                pending = False
            start = round(float(ts) * 1000)
            end = start + round(float(dur) * 1000)
            item = (start, _SLICE, -end)
            thread = threads.get(key)
            if thread is None or thread.items is not None:
                pid, _, tid = key.partition(',"tid":')
                self._item(index, int(pid), int(tid), item)
            else:
                if item < thread.last:
                    raise Unsorted()
                thread.last = item
                stack = thread.stack
                while stack and stack[-1][1] <= start:
                    stack.pop()
                if stack and end > stack[-1][1]:
                    self._place(thread, thread.pid, thread.tid, item, index)     # reports the overlap
                else:
                    stack.append((start, end, index))
            index += 1
        self._end_fast_run(index - run_start)
        self.index = index

    def _end_fast_run(self, n: int) -> None:
        """Account for the n fast-path events just checked (counted per run, not per line)."""
        if n:
            self.count += n
            self.seen_other = True
            self._last_fast = True

    def _other_line(self, line: str) -> None:
        stripped = line.rstrip()
        if not stripped:
            return                                        # whitespace between events
        if not self._pending:
            self._pending_index = self.index
        self._pending.append(stripped)
        self._last_fast = False
        if len(self._pending) >= _BATCH_LINES:
            self.flush_pending(final=False)

    def flush_pending(self, final: bool) -> None:
        """Parse and check the waiting lines; ``final``: they are the last events (no ',' after the last)."""
        lines, index = self._pending, self._pending_index
        self._pending = []
        if final and not lines:
            if self._last_fast:
                raise LayoutError(f"invalid JSON: trailing ',' after the last event {self.index - 1}")
            return
        if lines[-1].endswith(","):
            if final:
                raise LayoutError(f"invalid JSON: trailing ',' after the last event {index + len(lines) - 1}")
        elif not final:
            raise LayoutError(f"invalid JSON: missing ',' after event {index + len(lines) - 1}")
        else:
            lines[-1] += ","
        events = _parse_batch(lines, index)
        self.events(index, events)
        self.index = index + len(events)

    def event(self, index: int, event) -> None:
        problems = self.problems
        self.count += 1
        if not isinstance(event, dict):
            problems.add(f"event {index}: not an object")
            return
        ph = event.get("ph")
        required = _REQUIRED.get(ph) if isinstance(ph, str) else None
        if required is None:
            problems.add(f"event {index}: unknown or missing ph {ph!r}")
            return
        missing = [key for key in required if key not in event]
        if ph == "M" and event.get("name") in ("thread_name", "thread_sort_index") and "tid" not in event:
            missing.append("tid")
        if missing:
            problems.add(f"event {index} (ph {ph}): missing {', '.join(missing)}")
            return
        name = event.get("name")
        if name is not None:
            self._check_name(index, "name", name)
        pid = event["pid"]
        tid = event.get("tid", 0)
        if not _is_int(pid) or not _is_int(tid):
            problems.add(f"event {index}: pid/tid must be integers, got {pid!r}/{tid!r}")
            return
        if ph == "M":
            if self.seen_other:
                problems.add(f"event {index}: metadata event after the first non-metadata event")
            self._metadata(index, event)
            return
        self.seen_other = True
        ts = event["ts"]
        if not _is_number(ts):
            problems.add(f"event {index}: ts must be a finite number, got {ts!r}")
            return
        if ph == "X":
            dur = event["dur"]
            if not _is_number(dur) or dur < 0:
                problems.add(f"event {index}: dur must be a finite number >= 0, got {dur!r}")
                return
            start = _ns(ts)
            self._item(index, pid, tid, (start, _SLICE, -(start + _ns(dur))))
        elif ph in ("s", "f", "t"):
            self._flow(index, event, pid, tid, ts)

    def _check_name(self, index: int, what: str, name) -> None:
        if name in self._names_ok:
            return
        if not isinstance(name, str):
            self.problems.add(f"event {index}: {what} must be a string, got {name!r}")
        elif _CONTROL.search(name):
            self.problems.add(f"event {index}: {what} {name!r} contains control characters")
        elif len(self._names_ok) < 100000:
            self._names_ok.add(name)

    def _metadata(self, index: int, event: dict) -> None:
        args = event["args"]
        key = _METADATA_NAMES.get(event["name"])
        if not isinstance(args, dict):
            self.problems.add(f"event {index}: metadata args must be an object")
        elif key is not None and key not in args:
            self.problems.add(f"event {index}: {event['name']} needs args.{key}")
        elif key == "name":
            self._check_name(index, f"{event['name']}", args["name"])
        elif key == "sort_index" and not _is_int(args["sort_index"]):
            self.problems.add(f"event {index}: sort_index must be an integer")

    def _flow(self, index: int, event: dict, pid: int, tid: int, ts) -> None:
        flow_id = event["id"]
        if not _is_int(flow_id) or not 0 <= flow_id < MAX_FLOW_ID:
            self.problems.add(f"event {index}: flow id must be an integer in [0, 2^53), got {flow_id!r}")
            return
        ph = event["ph"]
        if ph == "f" and event.get("bp") not in (None, "e"):
            self.problems.add(f"event {index}: flow end bp must be \"e\" when given, got {event.get('bp')!r}")
        ts_ns = _ns(ts)
        if ph in ("s", "f"):
            entry = self.flows.setdefault((event["cat"], flow_id), {})
            if ph in entry:
                self.problems.add(f"event {index}: second flow '{ph}' for cat {event['cat']!r} id {flow_id}")
            else:
                entry[ph] = (index, ts_ns, event["name"])
        self._item(index, pid, tid, (ts_ns, _POINT, 0))

    # --- per thread: nesting and flow binding -------------------------------------------------------
    def _item(self, index: int, pid: int, tid: int, key: tuple) -> None:
        thread_key = _thread_key(pid, tid)
        thread = self.threads.get(thread_key)
        if thread is None:
            thread = self.threads[thread_key] = _Thread(pid, tid, self.buffered)
        if thread.items is not None:
            thread.items.append(key + (index,))
            return
        if thread.last is not None and key < thread.last:
            raise Unsorted()
        thread.last = key
        self._place(thread, pid, tid, key, index)

    def _place(self, thread: _Thread, pid: int, tid: int, key: tuple, index: int) -> None:
        stack = thread.stack
        start, kind, neg_end = key
        if kind == _SLICE:
            end = -neg_end
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                other = stack[-1]
                self.problems.add(
                    f"event {index}: X [{start / 1000}, {end / 1000}] µs on pid {pid} tid {tid} partially overlaps "
                    f"event {other[2]} [{other[0] / 1000}, {other[1] / 1000}]")
                return
            stack.append((start, end, index))
        else:
            while stack and stack[-1][1] < start:
                stack.pop()
            if not stack:
                self.problems.add(f"event {index}: flow point at {start / 1000} µs on pid {pid} tid {tid} is not "
                                  "on or inside any X slice of its thread")

    # --- end of file ----------------------------------------------------------------------------------
    def finish(self) -> List[str]:
        for thread in self.threads.values():
            if thread.items is not None:
                thread.items.sort()
                for item in thread.items:
                    self._place(thread, thread.pid, thread.tid, item[:3], item[3])
        for (cat, flow_id), entry in self.flows.items():
            if "s" not in entry or "f" not in entry:
                have = "s" if "s" in entry else "f"
                self.problems.add(f"event {entry[have][0]}: flow cat {cat!r} id {flow_id} has a '{have}' but no "
                                  f"'{'f' if have == 's' else 's'}'")
                continue
            (_, s_ts, s_name), (f_index, f_ts, f_name) = entry["s"], entry["f"]
            if s_name != f_name:
                self.problems.add(f"event {f_index}: flow cat {cat!r} id {flow_id}: names differ "
                                  f"({s_name!r} vs {f_name!r})")
            if f_ts < s_ts:
                self.problems.add(f"event {f_index}: flow cat {cat!r} id {flow_id} ends before it starts")
        return list(self.problems)


class LayoutError(Exception):
    pass


def _parse_batch(lines: List[str], first_index: int) -> list:
    text = "[" + "".join(lines)[:-1] + "]"
    try:
        return json.loads(text)
    except ValueError:
        pass
    for offset, line in enumerate(lines):
        if not line.endswith(","):
            raise LayoutError(f"invalid JSON: missing ',' after event {first_index + offset}")
        try:
            json.loads(line[:-1])
        except ValueError as exc:
            raise LayoutError(f"invalid JSON in event {first_index + offset}: {exc}") from None
    raise LayoutError(f"invalid JSON near event {first_index}")
