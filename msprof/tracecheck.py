"""Checker of Chrome trace JSON files: the rules a timeline must follow to load in a real viewer.

``check_trace(path_or_obj)`` returns a list of problems (empty = valid); ``assert_valid(path)`` raises
``TraceError`` listing them. Rules (outputs.md §2, docs/timeline.md):

* a JSON object with a ``traceEvents`` list (``displayTimeUnit``, when present, is "ms" or "ns"), or the
  CANN layout's JSON array of events with string times and flow ids (read whole);
* every event is an object with a known ``ph`` and the keys that phase needs; metadata events
  (``ph: "M"``) all come before the first other event;
* ``ts``/``dur`` are finite numbers (not strings), ``dur`` >= 0; ``pid``/``tid`` are integers;
* ``X`` events of one (pid, tid) nest properly: two slices are disjoint or one contains the other
  (shared boundaries allowed); compared at 1 ns resolution;
* flow events ``s``/``f`` pair up one to one by (cat, id), share a name, the ``f`` is not before its
  ``s``, ``id`` is an integer in [0, 2^53), and each endpoint lies on or inside an ``X`` slice of its own
  thread (viewers bind flows to the enclosing slice);
* names (event names, process/thread names) hold no control characters.

Speed: files in the one-event-per-line layout written by msprof.trace are read line by line
and checked in one pass with a stack per thread (memory does not grow with the number of events as long
as each thread's events are in time order). Any other JSON layout is loaded whole; threads whose events
are out of time order are checked after sorting.
"""
import json
from decimal import Decimal
from pathlib import Path
from typing import List, Union

from msprof.tracerules import MAX_FLOW_ID, Checker, LayoutError, Problems, Unsorted

__all__ = ["MAX_FLOW_ID", "TraceError", "assert_valid", "check_trace"]


class TraceError(RuntimeError):
    """A timeline broke the trace rules: a bug in the writer (reported as an internal error)."""


def _check_top(obj, problems: Problems) -> bool:
    if not isinstance(obj, dict):
        problems.add("top level is not a JSON object")
        return False
    if not isinstance(obj.get("traceEvents"), list):
        problems.add("no traceEvents list")
        return False
    unit = obj.get("displayTimeUnit")
    if unit is not None and unit not in ("ms", "ns"):
        problems.add(f"displayTimeUnit must be \"ms\" or \"ns\", got {unit!r}")
    return True


def _run(feed, top_problems: List[str]) -> List[str]:
    """Check once streaming; if some thread is out of time order, again with per-thread sorting."""
    for buffered in (False, True):
        checker = Checker(buffered)
        checker.problems.extend(top_problems)
        try:
            feed(checker)
        except Unsorted:
            continue
        except LayoutError as exc:
            checker.problems.add(str(exc))
            return list(checker.problems)
        return checker.finish()
    raise AssertionError("unreachable")


_HEADER = '{"traceEvents":['
# Small enough that the objects made for one chunk's lines are freed and reused for the next: with
# chunks of megabytes, the allocator hands its arenas back to the OS and faults them in again for every
# chunk; large enough that the per-chunk work costs nothing.
_CHUNK_BYTES = 1 << 16


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LayoutError(f"invalid JSON: not UTF-8 text: {exc}") from None


def _closing_line(text: bytes) -> int:
    """Offset of the first line of ``text`` that starts with "]" (it closes the events), or -1.

    A search for the single byte "]", rare inside events (only in names or other text), is several
    times faster than one for the two bytes "\\n]"."""
    at = text.find(b"]")
    while at > 0 and text[at - 1] != 0x0A:
        at = text.find(b"]", at + 1)
    return at


def _feed_lines(path: Path, trailer_out: list):
    """A feed for _run: a file in the one-event-per-line layout, read in chunks of whole lines; raises
    LayoutError on any deviation from the layout.

    The file is read as bytes and each chunk of whole lines decoded at once: cheaper than a text-mode
    file, which also scans for newlines to translate (a newline byte is never part of a multi-byte
    UTF-8 character, so cutting at one never splits a character)."""

    def feed(checker: "Checker") -> None:
        trailer_out.clear()
        with open(path, "rb") as handle:
            if handle.readline().rstrip(b"\r\n") != _HEADER.encode():
                raise LayoutError("not in line layout")
            rest: List[bytes] = []          # the line not yet complete (a list: a long line spans chunks)
            trailer = None
            while trailer is None:
                chunk = handle.read(_CHUNK_BYTES)
                if chunk:
                    cut = chunk.rfind(b"\n") + 1
                    if not cut:
                        rest.append(chunk)
                        continue
                    text = b"".join(rest + [chunk[:cut]]) if rest else chunk[:cut]
                    rest = [chunk[cut:]]
                else:
                    text, rest = b"".join(rest), []
                    if not text:
                        break
                    text += b"\n"                               # last line without a newline
                end = _closing_line(text)
                if end >= 0:                                    # the line that closes the events
                    trailer = _decode(text[end:] + b"".join(rest) + handle.read())
                    text = text[:end]
                if text:
                    checker.lines(_decode(text))
        if trailer is None:
            raise LayoutError("invalid JSON: the traceEvents list is not closed (truncated file?)")
        first, _, after = trailer.partition("\n")
        for line in after.split("\n"):
            if line.strip():
                raise LayoutError(f"invalid JSON: text after the end of the object: {line[:80]!r}")
        checker.flush_pending(final=True)
        try:
            tail = json.loads(_HEADER + first)
        except ValueError as exc:
            raise LayoutError(f"invalid JSON after the events: {exc}") from None
        trailer_out.append(tail)

    return feed


def _is_line_layout(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.readline().rstrip(b"\r\n") == _HEADER.encode()


def _from_array(events: list) -> dict:
    """The CANN layout's trace (docs/prof.md), a JSON array whose ``ts`` are µs since the epoch as strings
    and whose flow ids are strings, as the object the rules are about: times counted from the earliest, as
    numbers (exact: the differences are taken in decimal), ids as integers. A ``ts`` or an id that is not such
    a text is left as it is, for the rules to name. Flows sharing an id are told apart: a start pairs with
    the next end of its id."""
    stamps = [e["ts"] for e in events if isinstance(e, dict) and isinstance(e.get("ts"), str)]
    try:
        base = min(Decimal(t) for t in stamps) if stamps else Decimal(0)
    except ArithmeticError:
        return {"traceEvents": events}
    converted = []
    pending: dict = {}           # (cat, id) → the numbers of its starts not yet ended, oldest first
    for event in events:
        if isinstance(event, dict) and isinstance(event.get("ts"), str):
            event = dict(event, ts=float(Decimal(event["ts"]) - base))
            flow_id = event.get("id")
            if event.get("ph") in ("s", "f") and (isinstance(flow_id, str) and flow_id.isdigit() or (
                    isinstance(flow_id, int) and not isinstance(flow_id, bool) and flow_id >= 0)):
                # (an id is shared by the flows of a task's executions: each start pairs with the next end; a
                # framework's trace_view numbers its flows by ns since the epoch, beyond 2^53)
                waiting = pending.setdefault((event.get("cat"), str(flow_id)), [])
                if event["ph"] == "s":
                    waiting.append(len(converted))
                event["id"] = waiting.pop(0) if event["ph"] == "f" and waiting else len(converted)
        converted.append(event)
    # (the layout keeps the start of a flow whose task is left out, before the collection began: §2.5 of
    # docs/ecosystem-target.md; such a start has no end to pair with)
    unended = {k for waiting in pending.values() for k in waiting}
    return {"traceEvents": [e for k, e in enumerate(converted) if k not in unended]}


def check_trace(path_or_obj: Union[str, Path, dict, list]) -> List[str]:
    """Problems of a trace (a file path, or an already loaded object); an empty list means valid."""
    if isinstance(path_or_obj, list):
        path_or_obj = _from_array(path_or_obj)
    if not isinstance(path_or_obj, (str, Path)):
        problems = Problems()
        if not _check_top(path_or_obj, problems):
            return list(problems)
        events = path_or_obj["traceEvents"]
        return _run(lambda checker: checker.events(0, events), list(problems))
    path = Path(path_or_obj)
    try:
        line_layout = _is_line_layout(path)
    except OSError as exc:
        return [f"cannot read {path}: {exc}"]
    if line_layout:
        trailer: list = []
        problems = _run(_feed_lines(path, trailer), [])
        if trailer:
            top = Problems()
            _check_top(trailer[0], top)
            problems = list(top) + problems
        return problems
    try:
        with open(path, "r", encoding="utf-8") as handle:
            obj = json.load(handle)
    except (OSError, ValueError) as exc:
        return [f"invalid JSON: {exc}"]
    return check_trace(obj)


def assert_valid(path: Union[str, Path, dict]) -> None:
    problems = check_trace(path)
    if problems:
        raise TraceError(f"{path if isinstance(path, (str, Path)) else 'trace'} breaks the trace rules: "
                         + "; ".join(problems[:10]))
