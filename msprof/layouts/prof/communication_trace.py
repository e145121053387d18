"""The ``Communication`` process of a device's CANN timeline (HCCL data; docs/prof-format.md §11.4), event for
event as the reference analyser writes it:

* per communication group a thread ``Group <group name> Communication`` (its tid and sort index: the group's
  first index) with an ``X`` per op execution (the op's unique name, msprof.layouts.prof.families.hccl.op_rows;
  args rank_size, connection_id, model id, data_type, alg_type, count), and a thread ``Plane <k>`` per plane
  (tid the group's index + k + 1) with an ``X`` per task run (named by its hccl_info item; args its
  hccl_info's fields and the bandwidth of its size over its duration);
* HostToDevice flows as the reference draws them for communication: from each op's node call
  (``Node@launch``) to the op's slice, id ``connection id << 32`` − 1, and to each MEMCPY_ASYNC task of the
  op in Ascend Hardware, id ``connection id << 32`` + 0xFFFFFFFF (the other communication tasks have none:
  msprof.layouts.prof.cann_trace leaves their own flows out).

The runs are those op_summary's COMMUNICATION rows come from (few): read once, events formatted per task.
"""
from typing import Dict, Iterator, List, Optional

from msprof.collection import read_result_dir
from msprof.decode.hccl import DATA_TYPES, LINK_TYPES, TRANSPORT_TYPES
from msprof.events import FETCH_ROWS, device_number, us_text
from msprof.layouts.prof.family_trace import _Events, _epoch_ns, _event, _Thread
from msprof.layouts.prof.families import hccl
from msprof.layouts.prof.families.base import Context
from msprof.layouts.prof.trace import CANN_DEVICE, NO_CONTEXT, _host_pid, cann_pid, cann_process

CANN_COMMUNICATION = ("Communication", 17)
UNKNOWN_MODEL = 4294967295
INVALID_PLANES = (-1, 0xFFFFFFFF)
# the reference's byte → GB and ns → s factors (0.001 ** 3 each: its bandwidth's float operations)
GIGA = 0.001 ** 3
MEMCPY = "MEMCPY_ASYNC"


class CommunicationSource(_Events):
    """The Communication process and its flows (see the module's docstring); ``host``: the CANN host source,
    whose node calls the flows start from (and their connection ids)."""

    noun, owner = "communication slice", "plane"

    def __init__(self, report, host):
        self.report, self.host = report, host
        self.context = Context(read_result_dir(report.unit.path))
        device = device_number(report)
        app = _host_pid(report)
        self.pid = cann_pid(app, CANN_COMMUNICATION, device)
        self.process = cann_process(CANN_COMMUNICATION, device)
        self.device_pid = cann_pid(app, CANN_DEVICE, device)
        self.threads: Dict[int, _Thread] = {}
        self._hash: Optional[dict] = None

    def batches(self, window=None) -> Iterator[list]:
        if window is not None and window[0] == 1:     # (a few events per op: the first half has them)
            return iter(())
        conn, ctx = self.report.conn, self.context
        tasks = hccl.communication_tasks(conn, ctx)
        hccl.op_rows(conn, ctx, tasks)                # (each task's unique op name)
        first = self._threads(tasks, self._names)
        rows = [self._task(task, first[task["group"]]) for task in tasks if task["plane"] not in INVALID_PLANES]
        ops: Dict[tuple, dict] = {}
        for task in tasks:
            if task["master"]:
                op = ops.setdefault((task["unique_name"], task["op_begin"]), dict(task, end=0))
                op["start"] = min(op["start"], task["start"])
                op["end"] = max(op["end"], task["start"] + task["duration"])
        rows += [self._op(op, first[op["group"]]) for op in ops.values()]
        rows.sort(key=lambda row: row[0])
        return iter([rows[k:k + FETCH_ROWS] for k in range(0, len(rows), FETCH_ROWS)])

    def _threads(self, tasks: List[dict], names: dict) -> Dict[str, int]:
        """Name the groups' and planes' threads as the reference numbers them; each group's first index."""
        planes: Dict[str, set] = {}
        for task in tasks:
            plane = 0 if task["plane"] in INVALID_PLANES else task["plane"]
            planes.setdefault(task["group"], set()).add(plane)
        first, index = {}, 0
        for group, kept in planes.items():
            first[group] = index
            text = _group_name(group, names)
            self.threads[index] = _Thread(f"Group {text} Communication" if group != "N/A" else "Communication", index)
            for plane in sorted(kept):
                self.threads[index + plane + 1] = _Thread(f"Plane {plane}", index + plane + 1)
            index = index + max(kept) + 2
        return first

    def _task(self, task: dict, first: int) -> tuple:
        """A task run's slice on its plane's thread, and the flow to a MEMCPY_ASYNC task in Ascend Hardware."""
        ctx = self.context
        text = ctx.ns_text(task["start"])
        duration, size = task["duration"], task["size"] or 0
        notify = task["notify_id"]
        estimated = task["duration_estimated"]
        args = {"notify_id": str(notify & 0xFFFFFFFFFFFFFFFF) if notify is not None else "N/A",
                "duration estimated(us)": int(estimated) if estimated is not None and estimated.is_integer()
                else estimated,
                "stream id": task["stream"], "task id": task["task"], "context id": task["context_id"],
                "task type": self._names.get(task["item_id"], str(task["item_id"])),
                "src rank": task["local_rank"], "dst rank": task["remote_rank"],
                "transport type": TRANSPORT_TYPES.get(task["transport_type"], str(task["transport_type"])),
                "size(Byte)": size, "data type": DATA_TYPES.get(task["data_type"], str(task["data_type"])),
                "link type": LINK_TYPES.get(task["link_type"], str(task["link_type"])),
                "bandwidth(GB/s)": 0 if abs(duration) < 1e-15 else (size * GIGA) / (duration * GIGA),
                "model id": task["model"] if task["model"] is not None else UNKNOWN_MODEL}
        event = dict(name=args["task type"], pid=self.pid, ts=text, dur=duration / 1000, args=args, ph="X")
        flow = None
        if task["task_type"] == MEMCPY:
            flow = ((self.host.ids(task["op_seq"]) << 32) + NO_CONTEXT, task["thread"], task["op_begin"],
                    self.device_pid, task["stream"], text)
        start = _epoch_ns(text)
        return start, start + _epoch_ns(str(duration / 1000)), first + task["plane"] + 1, event, flow

    def _op(self, op: dict, first: int) -> tuple:
        """An op execution's slice on its group's thread, and the flow to it from its node call."""
        text = self.context.ns_text(op["start"])
        connection = self.host.ids(op["op_seq"])
        args = {"rank_size": op["rank_size"], "connection_id": connection,
                "model id": op["model"] if op["model"] is not None else UNKNOWN_MODEL,
                "data_type": DATA_TYPES.get(op["op_data_type"], str(op["op_data_type"])),
                "alg_type": str(op["alg_type"]), "count": op["count"]}
        duration = (op["end"] - op["start"]) / 1000
        event = dict(name=op["unique_name"], pid=self.pid, ts=text, dur=duration, args=args, ph="X")
        flow = ((connection << 32) - 1, op["thread"], op["op_begin"], self.pid, first, text)
        start = _epoch_ns(text)
        return start, start + _epoch_ns(str(duration)), first, event, flow

    @property
    def _names(self) -> dict:
        """hash_dic's strings (read once: the group and task names)."""
        if self._hash is None:
            self._hash = dict(self.report.conn.execute("SELECT hash, text FROM host.hash_string"))
        return self._hash

    def write(self, rows: list, out, lanes) -> Optional[list]:
        texts, count = [], 0
        self.named(out)
        for k, (start, end, thread, event, flow) in enumerate(rows):
            if count + 3 > out.room and count:
                out.add("".join(texts), count)
                return rows[k:]
            # (slices of a thread that overlap partially go to an "(overlap)" thread, as msprof's trace rules need)
            lane = lanes.place(("communication", thread), thread, self.threads[thread].name, thread, start, end)
            if lane.tid != thread and (self.pid, lane.tid) not in out.threads:
                out.use(self.pid, lane.tid, self.process, lane)
            texts.append(_event(**dict(event, tid=lane.tid)))
            count += 1
            if flow is not None:
                if flow[3] == self.pid:            # (a flow to this slice: its end on the slice's thread)
                    flow = flow[:4] + (lane.tid,) + flow[5:]
                made = self._flow(flow, out.slice_index)
                texts.append(made)
                count += 2 if made else 0
        out.add("".join(texts), count)
        return None

    def _flow(self, flow: tuple, index: int) -> str:
        """The flow's start on its node call's thread (when that call is in this file) and its end."""
        flow_id, thread, begin, pid, tid, end_text = flow
        (start,) = self.report.conn.execute(f"SELECT {self.host.time.host_ns_sql(':b')}",
                                            dict(self.report.params, b=begin)).fetchone()
        host_tid = self.host.lane_of_call(thread, start, index)
        if host_tid is None:
            return ""
        common = {"cat": "HostToDevice", "name": f"HostToDevice{flow_id}", "id": str(flow_id)}
        return (_event(ph="s", pid=self.host.pid, tid=host_tid, ts=us_text(start), **common)
                + _event(ph="f", bp="e", pid=pid, tid=tid, ts=end_text, **common))

    def named(self, out) -> None:
        for tid, thread in self.threads.items():
            out.use(self.pid, tid, self.process, thread)


def _group_name(group: str, names: dict) -> str:
    """A group's name through hash_dic (its id as text without one)."""
    if group == "N/A":
        return group
    value = int(group)
    signed = value - (1 << 64) if value >= 1 << 63 else value
    return names.get(signed, names.get(value, group))


