"""HWTS task log, ``hwts.data.*`` — 64 B ``=BBHHHQ12I`` (raw-format.md §5.4).

Start and end records are paired by (stream id, task id) in file order. An end without a start, or a
start that never ends, is kept as an unpaired task (one time missing), never given a made-up time.
"""
import struct

RECORD_SIZE = 64
# flags (log type | counter << 4), task type, task id, syscnt, stream field (magic and reserved skipped:
# the magic is not enforced, raw-format.md §5.4)
LAYOUT = struct.Struct("<BB4xHqI44x")
LOG_START, LOG_END = 0, 1
TASK_TYPES = {0: "AA_CORE", 1: "AA_CPU"}
ASCEND_TASK_TYPES = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE"}


def looks_aligned(record: bytes) -> bool:
    return record[2:4] == b"\xd3\x6b"


class Pairer:
    """Stateful pairing over the whole stream. ``feed`` returns finished task tuples:
    (stream_id, task_id, task_type, start_syscnt, end_syscnt, exec_n) with None for a missing side.

    ``exec_n`` numbers the executions of one (stream, task) from 0, so the n-th PMU record of that
    task can be matched to it.
    """

    def __init__(self):
        self.pending = {}  # (stream_id << 16 | task_id) → (start syscnt, task type)
        self.executions = {}
        self.last_counter = None
        self.gaps = []          # (stream_id, task_id, expected counter, found counter)
        self.unmatched_ends = 0
        self.unended_starts = 0
        self.other_logs = 0

    def feed(self, records):
        finished = []
        append = finished.append
        pending = self.pending
        executions = self.executions
        last = self.last_counter
        expected = None if last is None else (last + 1) & 15
        for flags, task_type, task_id, syscnt, stream_field in records:
            if flags >> 4 != expected and expected is not None:
                self.gaps.append((stream_field & 0x7FF, task_id, expected, flags >> 4))
            expected = ((flags >> 4) + 1) & 15
            log_type = flags & 7
            key = (stream_field & 0x7FF) << 16 | task_id
            if log_type == LOG_END:
                started = pending.pop(key, None)
                n = executions.get(key, 0)
                executions[key] = n + 1
                if started is None:
                    self.unmatched_ends += 1
                    append((key >> 16, task_id, task_type, None, syscnt, n))
                else:
                    append((key >> 16, task_id, started[1], started[0], syscnt, n))
            elif log_type == LOG_START:
                earlier = pending.get(key)
                if earlier is not None:  # previous start never ended
                    self.unended_starts += 1
                    n = executions.get(key, 0)
                    executions[key] = n + 1
                    append((key >> 16, task_id, earlier[1], earlier[0], None, n))
                pending[key] = (syscnt, task_type)
            else:
                self.other_logs += 1
        if expected is not None:
            self.last_counter = (expected - 1) & 15
        return finished

    def warnings(self, name: str):
        """One line per kind of problem met in stream ``name`` (for the import's notices)."""
        lines = []
        if self.gaps:
            shown = ", ".join(f"stream {s} task {t} (counter {found}, expected {want})"
                              for s, t, want, found in self.gaps[:5])
            more = f" and {len(self.gaps) - 5} more" if len(self.gaps) > 5 else ""
            lines.append(f"{name}: rolling counter gap, HWTS records lost before {shown}{more}")
        if self.unmatched_ends:
            lines.append(f"{name}: {self.unmatched_ends} task end(s) without a start (no start time invented)")
        if self.unended_starts:
            lines.append(f"{name}: {self.unended_starts} task start(s) never ended (no end time invented)")
        return lines

    def finish(self):
        """Starts still open at the end of the stream."""
        left = []
        for key, (syscnt, task_type) in sorted(self.pending.items(), key=lambda kv: kv[1][0]):
            self.unended_starts += 1
            n = self.executions.get(key, 0)
            self.executions[key] = n + 1
            left.append((key >> 16, key & 0xFFFF, task_type, syscnt, None, n))
        self.pending.clear()
        return left
