"""Step (training) trace of a PROF_ device: ``ts_track.data.N.slice_k``, tag-10 records of 40 bytes
(docs/prof-format.md, "Step trace"), decoded by msprof.decode.step_trace (the JOB layout's decoder) into
``step_trace``; its iterations derived as the reference derives them into ``iteration`` (every mark) and
``training_trace`` (step_trace's rows), ``all_reduce`` and ``get_next``.

The derivation replays the reference's own order of the marks (per model, by counter; its reordering of
pipelined model executions) through its state machine: a model start begins an iteration, a model end or an
iteration end ends it (an iteration end also begins the next), and the FP/BP, reduce and get-next marks go to
the iteration current when they arrive. The marks are few (a handful per iteration): they are read in one
ordered scan.
"""
from collections import deque
from typing import Dict, Iterable, List

from msprof.decode.step_trace import StepTraceDecoder
from msprof.layouts.prof.families.base import Context, Family, kinds
from msprof.store import TableDef

MODEL_START, MODEL_END, FP, BP, ITER_END, MSTX = 0, 1, 2, 3, 4, 11
REDUCE_FIRST, GET_NEXT_FIRST, STEP_FIRST = 10000, 20000, 60000
UNKNOWN_MODEL = -1                      # printed N/A
COLUMNS = ["Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)", "Iteration Time(us)",
           "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)", "Model ID"]
REDUCE_COLUMNS = ["Reduce Start(us)", "Reduce Duration(us)"]

TABLES = {
    "step_trace": TableDef({"syscnt": int, "index_id": int, "model_id": int, "stream_id": int, "task_id": int,
                            "tag_id": int}),
    # one row per iteration, in the reference's order (by end, then model and index); 0 = no such mark
    "training_trace": TableDef({"rank": int, "model_id": int, "iteration_id": int, "step_start": int,
                                "fp": int, "bp": int, "step_end": int, "data_aug": int}, "rank"),
    "all_reduce": TableDef({"model_id": int, "iteration_id": int, "step_end": int, "seq": int, "stream_id": int,
                            "start": int, "end": int}),
    "get_next": TableDef({"model_id": int, "iteration_id": int, "start": int, "end": int}),
}

FAMILY = Family("step_trace", "device", kinds((r"^ts_track\.data(\.\d+)?$", "step_trace")), TABLES,
                {"step_trace": lambda item: StepTraceDecoder(keep=False)})


class _Iterations:
    """The reference's index tracker of one model: iterations numbered from 1, each with its start, end and
    the marks dispatched to it while it was current."""

    def __init__(self):
        self.state = MODEL_END
        self.index = 1
        self.spans: Dict[int, dict] = {}
        self.marks: Dict[int, dict] = {}

    def take(self, syscnt: int, tag: int, stream: int) -> None:
        self._track(syscnt, tag)
        marks = self.marks.setdefault(self.index, _empty_marks())
        if tag >= GET_NEXT_FIRST:
            marks["get_next"].setdefault(tag // 2, []).append((syscnt, tag, stream))
        elif tag >= REDUCE_FIRST:
            pairs = marks["reduce"].setdefault(stream, [])
            if tag % 2 == 0:
                pairs.append([syscnt, None])
            elif pairs:
                pairs[-1][1] = syscnt
        elif tag == FP:
            marks["fp"] = syscnt
        elif tag == BP:
            marks["bp"] = syscnt

    def _track(self, syscnt: int, tag: int) -> None:
        state = self.state
        if tag == MODEL_START and state in (MODEL_END, ITER_END):
            self._start(syscnt)
            self.state = MODEL_START
        elif tag == MODEL_END and state == MODEL_START:
            self._finish(syscnt)
            self.state = MODEL_END
        elif tag == ITER_END and state in (MODEL_START, ITER_END):
            self._finish(syscnt)
            self._start(syscnt)
            self.state = ITER_END

    def _start(self, syscnt: int) -> None:
        self.marks[self.index] = _empty_marks()
        self.spans.setdefault(self.index, {})["start"] = syscnt

    def _finish(self, syscnt: int) -> None:
        self.spans[self.index]["end"] = syscnt
        self.index += 1

    def finished(self) -> Iterable[tuple]:
        """(index, start, end, marks) of the iterations that ended (the current one never did)."""
        for index, span in self.spans.items():
            if index != self.index:
                yield index, span.get("start", 0), span.get("end", 0), self.marks.get(index, _empty_marks())


def _empty_marks() -> dict:
    return {"fp": 0, "bp": 0, "reduce": {}, "get_next": {}}


def reordered(marks: Iterable[tuple]) -> List[tuple]:
    """The reference's reordering of one device's marks (index, model, syscnt, tag, stream), sorted by model and
    counter, for pipelined model executions: a model execution's marks stay together until a model end closes
    the oldest open one."""
    out: List[tuple] = []
    queue: deque = deque()
    model = object()
    for mark in marks:
        tag = mark[3]
        if mark[1] != model:
            out += [m for entry in queue for m in entry[1]]
            queue, model = deque(), mark[1]
        if tag in (MODEL_START, MSTX):
            queue.append(([mark], [mark]))
        elif tag == MODEL_END:
            starts = 0
            while queue:
                if queue[0][0][0][3] == MODEL_START:
                    starts += 1
                    if starts == 2:
                        break
                out += queue.popleft()[1]
            out.append(mark)
        elif GET_NEXT_FIRST <= tag < STEP_FIRST:
            if queue:
                queue[-1][1].append(mark)
        elif tag >= REDUCE_FIRST:
            for tags, every in queue:
                if tags[-1][3] != ITER_END:
                    every.append(mark)
                    break
        else:
            for tags, every in queue:
                if tags[-1][3] < tag:
                    tags.append(mark)
                    every.append(mark)
                    break
            else:
                queue.append(([mark], [mark]))
    return out + [m for entry in queue for m in entry[1]]


def derive(conn) -> None:
    """training_trace, all_reduce and get_next from the marks (docs/prof-format.md, "Step trace")."""
    marks = conn.execute("SELECT index_id, model_id, syscnt, tag_id, stream_id FROM step_trace"
                         " GROUP BY index_id, model_id, syscnt, tag_id, stream_id ORDER BY model_id, syscnt, min(rowid)")
    models: Dict[int, _Iterations] = {}
    for _index, model, syscnt, tag, stream in reordered(marks):
        models.setdefault(model, _Iterations()).take(syscnt, tag, stream)
    rows, reduces, get_nexts = [], [], []
    for model, tracker in models.items():
        for index, start, end, got in tracker.finished():
            if not start or not end or start == end:
                break           # the reference stops there (its check raises, the rows so far are kept)
            rows.append([model, index, start, got["fp"], got["bp"], end, 0])
            for stream, pairs in got["reduce"].items():
                reduces += [(model, index, end, stream, s, e) for s, e in pairs]
            get_nexts += _get_next_pairs(model, index, got["get_next"])
    rows.sort(key=lambda row: row[5])
    _data_aug(rows)
    conn.executemany("INSERT INTO training_trace VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     [(rank,) + tuple(row) for rank, row in enumerate(rows)])
    conn.executemany("INSERT INTO all_reduce VALUES (?, ?, ?, ?, ?, ?, ?)",
                     [(m, i, e, n, st, s, en) for n, (m, i, e, st, s, en) in enumerate(reduces)])
    conn.executemany("INSERT INTO get_next VALUES (?, ?, ?, ?)", get_nexts)


def _data_aug(rows: List[list]) -> None:
    """Data Aug Bound: from the closest earlier iteration (by end, any model) that ended before this FP start."""
    for i, row in enumerate(rows):
        fp = row[3]
        if not fp:
            continue
        j = i - 1
        while j >= 0 and not fp > rows[j][5]:
            j -= 1
        if j >= 0:
            row[6] = fp - rows[j][5]


def _get_next_pairs(model: int, index: int, groups: dict) -> List[tuple]:
    """Get-next start (even tag) and end (odd) marks of one key and stream, each start with the first end not
    before it (the latest start not after that end)."""
    pairs = []
    for key, records in groups.items():
        by_stream: Dict[int, tuple] = {}
        for syscnt, tag, stream in records:
            starts, ends = by_stream.setdefault(stream, (deque(), deque()))
            (ends if tag % 2 else starts).append(syscnt)
        for starts, ends in by_stream.values():
            while starts and ends:
                start, end = starts.popleft(), ends.popleft()
                while ends and end < start:
                    end = ends.popleft()
                while starts and starts[0] <= end:
                    start = starts.popleft()
                pairs.append((model, index, start, end))
    return pairs


FAMILY.derive = derive


def summary(conn, context: Context) -> tuple:
    """step_trace's columns (before Device_id) and text rows, as the reference writes them."""
    rows = conn.execute("SELECT model_id, iteration_id, step_start, fp, bp, step_end, data_aug FROM training_trace"
                        " ORDER BY rank").fetchall()
    most = conn.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM all_reduce GROUP BY step_end, model_id)"
                        ).fetchone()[0] or 0
    columns = COLUMNS + REDUCE_COLUMNS * most
    out = []
    for model, index, start, fp, bp, end, aug in rows:
        cells = [str(index), _time(context, fp), _time(context, bp), _time(context, end),
                 _duration(context, end - start), _duration(context, bp and fp and bp - fp),
                 _duration(context, bp and end - bp), _duration(context, aug),
                 "N/A" if model == UNKNOWN_MODEL else str(model)]
        for start_r, end_r in conn.execute("SELECT start, end FROM all_reduce WHERE step_end = ? AND model_id = ?"
                                           " ORDER BY seq", (end, model)):
            cells += [context.device_text(start_r), repr(round((end_r - start_r) * (1e6 / context.hz), 3))]
        if _seen(context, cells[3], end - start):
            out.append(cells)
    return columns, out


def _time(context: Context, syscnt: int) -> str:
    return context.device_text(syscnt) if syscnt else "N/A"


def _duration(context: Context, delta: int) -> str:
    return repr(context.duration_us(delta)) if delta else "N/A"


def _seen(context: Context, end_text: str, ticks: int) -> bool:
    """The reference's start-time filter of a step_trace row, on texts: its start (end less its time) after
    the collection's beginning, or the beginning inside it."""
    from decimal import Decimal
    start = str((Decimal(end_text) - Decimal(repr(context.duration_us(ticks)))).quantize(Decimal("0.000")))
    begin = context.begin_text
    return start > begin or start < begin < end_text + "\t"
