"""The communication analyses of a PROF_ (``msprof --analyze=on``, issue 37): ``analyze/communication.json``
(per op execution: its time split into transit, wait, synchronization and idle time, and its bandwidth per
transport) and ``analyze/communication_matrix.json`` (per op execution: size, time and bandwidth per rank
pair), as the reference analyser computes and writes them (docs/prof-format.md, "HCCL").

The inputs are the communication tasks of msprof.layouts.prof.families.hccl with their hccl_info fields, named
per op execution as op_summary's COMMUNICATION rows are, keyed ``<name>@<group id>``; tasks that started
before the collection began are left out. The reference's floats are kept as it computes them (the order of
its sums, ints where it leaves a 0 untouched), so that both files are the same bytes.
"""
import json
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Sequence

from msprof.decode.hccl import LINK_TYPES, RDMA_TYPES, TRANSPORT_TYPES
from msprof.layouts.prof.families.base import Context
from msprof.layouts.prof.families.hccl import communication_tasks, named_tasks
from msprof.outputs import atomic_open, refuse_links_below

TOTAL = "Total HCCL Operators"
TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")       # Communication Bandwidth Info, in this order
TIME_KEYS = ("Start Timestamp(us)", "Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
             "Synchronization Time(ms)", "Idle Time(ms)", "Wait Time Ratio", "Synchronization Time Ratio")
# a packet larger than this (MB) is a large one; any other transport: larger than 0
LARGE_PACKET_MB = {"RDMA": 0.5, "HCCS": 32, "PCIE": 32, "SIO": 32}
TRANSIT_TASKS = ("Memcpy", "Reduce_Inline")     # the SDMA tasks that move data
PAYLOAD = "RDMA_SEND_PAYLOAD"
# an RDMA payload's transfer ends with the task this many places after the payloads, less 2 (send/receive
# ops have no barrier)
CLOSING_TASKS = {True: 3, False: 5}
MATRIX_TRANSPORTS = {"HCCS": "HCCS", "HCCS_SW": "HCCS", "PCIE": "PCIE", "RDMA": "RDMA", "LOCAL": "LOCAL",
                     "SIO": "SIO"}
NO_RANK = 0xFFFFFFFF


def executions(conn, context: Context) -> Dict[str, List[dict]]:
    """The communication tasks of each op execution (``<name>@<group id>``), each with the hccl_info fields
    the analyses read, in the reference's order (host launch time, then device start)."""
    tasks = communication_tasks(conn, context)
    infos = {row[0]: row[1:] for row in conn.execute(
        "SELECT i.rowid, coalesce(n.text, i.item_id), i.local_rank, i.remote_rank, i.link_type, i.transport_type,"
        " i.rdma_type FROM host.hccl_info i LEFT JOIN host.hash_string n ON n.hash = i.item_id")}
    out: Dict[str, List[dict]] = defaultdict(list)
    for name, task in named_tasks(tasks, context):
        if task["start"] < context.begin_raw_ns or task["info"] not in infos:
            continue
        item, local, remote, link, transport, rdma = infos[task["info"]]
        out[f"{name}@{task['group']}"].append(dict(
            task, name=name, hccl_name=str(item), local_rank=local, remote_rank=remote,
            link=LINK_TYPES.get(link, str(link)), transport=TRANSPORT_TYPES.get(transport, str(transport)),
            rdma=RDMA_TYPES.get(rdma, str(rdma)), size=task["size"] or 0))
    return out


def communication(ops: Dict[str, List[dict]], context: Context) -> dict:
    """communication.json: each op execution with a master task, then the total over them."""
    out = {}
    for key, events in ops.items():
        masters = [e for e in events if e["master"]]
        if not masters:
            continue         # (the reference stops with an error: no op plane to time)
        times = _times(events, masters[0]["plane"])
        times["Start Timestamp(us)"] = float(context.ns_text(min(masters, key=lambda e: e["start"])["start"]))
        out[key] = {"Communication Time Info": times, "Communication Bandwidth Info": _bandwidths(events)}
    total_times = dict.fromkeys(TIME_KEYS, 0)
    total_bands = _empty_bandwidths()
    for op in out.values():
        for name, value in op["Communication Time Info"].items():
            if name not in ("Wait Time Ratio", "Synchronization Time Ratio", "Start Timestamp(us)"):
                total_times[name] += value
        for transport, part in op["Communication Bandwidth Info"].items():
            total_bands[transport]["Transit Time(ms)"] += part["Transit Time(ms)"]
            total_bands[transport]["Transit Size(MB)"] += part["Transit Size(MB)"]
            if transport != "SDMA":
                for size, (count, ms) in part["Size Distribution"].items():
                    total_bands[transport]["Size Distribution"][size][0] += count
                    total_bands[transport]["Size Distribution"][size][1] += ms
    _ratios(total_times)
    for transport in TRANSPORTS:
        _bandwidth(total_bands[transport], transport != "SDMA", transport)
    if out:
        out[TOTAL] = {"Communication Time Info": total_times, "Communication Bandwidth Info": total_bands}
    return out


def _times(events: List[dict], plane: int) -> dict:
    """One execution's time split, over the tasks of its master task's plane: transit (data moved), wait
    (Notify_Wait), synchronization (the waits before the first transit) and idle (the rest)."""
    times = dict.fromkeys(TIME_KEYS, 0)
    events = [e for e in events if e["plane"] == plane]
    closing = CLOSING_TASKS[_send_or_receive(events)]
    waiting, at = True, 0
    while at < len(events):
        event = events[at]
        if _sdma_transit(event):
            waiting = False
            times["Transit Time(ms)"] += event["duration"] / 1e6
        if event["rdma"] == PAYLOAD:
            count, moved = _payloads(events, at, closing)
            if moved is None:
                at += count
                continue
            times["Transit Time(ms)"] += moved[0]
            at += closing + count - 1
            waiting = False
            continue
        if event["hccl_name"] == "Notify_Wait":
            wait = event["duration"] / 1e6
            if waiting:
                times["Synchronization Time(ms)"] += wait
            times["Wait Time(ms)"] += wait
        at += 1
    last = max(events, key=lambda e: e["start"] + e["duration"])
    first = min(events, key=lambda e: e["start"])
    times["Elapse Time(ms)"] = (last["start"] + last["duration"] - first["start"]) / 1e6
    times["Idle Time(ms)"] = times["Elapse Time(ms)"] - times["Transit Time(ms)"] - times["Wait Time(ms)"]
    _ratios(times)
    return times


def _ratios(times: dict) -> None:
    """Wait and synchronization time as shares of themselves plus transit time (left as they are when both
    are 0)."""
    for ratio, part in (("Wait Time Ratio", "Wait Time(ms)"), ("Synchronization Time Ratio",
                                                              "Synchronization Time(ms)")):
        whole = times[part] + times["Transit Time(ms)"]
        if whole:
            times[ratio] = round(times[part] / whole, 4)


def _empty_bandwidths() -> dict:
    return {t: {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
                "Size Distribution": defaultdict(lambda: [0, 0])} for t in TRANSPORTS}


def _bandwidths(events: List[dict]) -> dict:
    """One execution's data moved per transport: SDMA transits by their link (HCCS, PCIE, SIO; any other link
    counts as SDMA itself, and SDMA adds up all four), RDMA payloads by their transport."""
    bands = _empty_bandwidths()
    closing = CLOSING_TASKS[_send_or_receive(events)]
    for plane_events in _by_plane(events).values():
        at = 0
        while at < len(plane_events):
            event = plane_events[at]
            if _sdma_transit(event):
                link = "HCCS" if event["link"] == "HCCS_SW" else event["link"]
                _record(bands[link if link in ("PCIE", "HCCS", "SIO") else "SDMA"], event["size"] / 1000 ** 2,
                        event["duration"] / 1e6)
            if event["rdma"] == PAYLOAD:
                count, moved = _payloads(plane_events, at, closing)
                if moved is None:
                    at += count
                    continue
                if event["transport"] in bands:
                    _record(bands[event["transport"]], moved[1], moved[0])
                at += closing + count - 1
                continue
            at += 1
    sdma = bands["SDMA"]
    sdma["Transit Size(MB)"] += (bands["HCCS"]["Transit Size(MB)"] + bands["PCIE"]["Transit Size(MB)"]
                                 + bands["SIO"]["Transit Size(MB)"])
    sdma["Transit Time(ms)"] += (bands["HCCS"]["Transit Time(ms)"] + bands["PCIE"]["Transit Time(ms)"]
                                 + bands["SIO"]["Transit Time(ms)"])
    for transport in TRANSPORTS:
        _bandwidth(bands[transport], transport != "SDMA", transport)
    return bands


def _record(band: dict, size_mb: float, ms: float) -> None:
    band["Transit Size(MB)"] += size_mb
    band["Transit Time(ms)"] += ms
    band["Size Distribution"][size_mb][0] += 1
    band["Size Distribution"][size_mb][1] += ms


def _bandwidth(band: dict, packets: bool, transport: str) -> None:
    """GB/s from MB and ms (4 decimals); the share of large packets (not for SDMA, whose packets are its
    links')."""
    if band["Transit Time(ms)"] != 0:
        band["Bandwidth(GB/s)"] = round((band["Transit Size(MB)"] / 1000) / (band["Transit Time(ms)"] / 1000), 4)
    if not packets:
        return
    large = sum(count for size, (count, _ms) in band["Size Distribution"].items()
                if size > LARGE_PACKET_MB.get(transport, 0))
    every = sum(count for count, _ms in band["Size Distribution"].values())
    if every > 0:
        band["Large Packet Ratio"] = round(large / every, 4)


def matrix(ops: Dict[str, List[dict]]) -> dict:
    """communication_matrix.json: per op execution then in total, per ``<local rank>-<remote rank>`` pair,
    the transport, the MB and ms moved, and MB/ms."""
    links: Dict[str, Dict[str, list]] = {}
    for key, events in ops.items():
        links[key] = op_links = {}
        closing = CLOSING_TASKS[_send_or_receive(events)]
        for plane_events in _by_plane(events).values():
            at = 0
            while at < len(plane_events):
                event = plane_events[at]
                if event["local_rank"] == NO_RANK:
                    at += 1
                    continue
                if event["transport"] == "SDMA" and event["hccl_name"] in TRANSIT_TASKS:
                    transport = "LOCAL" if event["link"] == "ON_CHIP" else ("HCCS" if event["link"] == "HCCS_SW"
                                                                            else event["link"])
                    _link(op_links, event, transport, event["size"] / 1000 ** 2, event["duration"] / 1e6)
                if event["rdma"] == PAYLOAD:
                    count, moved = _payloads(plane_events, at, closing)
                    if moved is not None:
                        _link(op_links, event, event["transport"], moved[1], moved[0])
                        at += closing - 1
                    at += count
                    continue
                at += 1
    total: Dict[str, list] = {}
    for op_links in links.values():
        for pair, (transport, size, ms) in op_links.items():
            entry = total.setdefault(pair, [None, 0, 0])
            entry[0] = transport
            entry[1] += size
            entry[2] += ms
    links[TOTAL] = total
    return {key: {pair: {"Transport Type": transport, "Transit Size(MB)": size, "Transit Time(ms)": ms,
                         "Bandwidth(GB/s)": round(size / ms, 4) if ms else 0}
                  for pair, (transport, size, ms) in op_links.items()} for key, op_links in links.items()}


def _link(links: dict, event: dict, transport: str, size: float, ms: float) -> None:
    remote = event["local_rank"] if event["remote_rank"] == NO_RANK else event["remote_rank"]
    entry = links.setdefault(f"{event['local_rank']}-{remote}", [None, 0, 0])
    entry[0] = MATRIX_TRANSPORTS.get(transport)     # (another transport: null, as the reference writes it)
    entry[1] += size
    entry[2] += ms


def _sdma_transit(event: dict) -> bool:
    return event["hccl_name"] in TRANSIT_TASKS and event["transport"] == "SDMA" and event["link"] != "ON_CHIP"


def _send_or_receive(events: List[dict]) -> bool:
    name = events[0]["name"].lower()
    return "send" in name or "receive" in name


def _by_plane(events: List[dict]) -> Dict[int, List[dict]]:
    planes: Dict[int, List[dict]] = defaultdict(list)
    for event in events:
        planes[event["plane"]].append(event)
    return planes


def _payloads(events: List[dict], at: int, closing: int):
    """The RDMA payload tasks from ``at`` on: their count and ((ms, MB) from the first payload's start to the
    end of the task closing them, or None when the data ends before that task)."""
    count = 0
    while at + count < len(events) and events[at + count]["rdma"] == PAYLOAD:
        count += 1
    end = at + count + closing - 2
    if end >= len(events):
        return count, None
    size = sum(e["size"] for e in events[at:at + count]) / 1000 ** 2
    return count, ((events[end]["duration"] + events[end]["start"] - events[at]["start"]) / 1e6, size)


def write_analyses(root: Path, devices: List[tuple], rules: Sequence[str]) -> List[Path]:
    """Write ``rules``' files into ``root``/analyze from ``devices``: (executions, clock) of each device with
    data (family_files.device_executions), in the reference's order, directory names descending. As the
    reference, communication.json keeps each execution as the last device that has it saw it, timed with that
    last device's clock, and the matrix adds up every device's tasks of an execution."""
    if not devices:
        return []
    latest: Dict[str, List[dict]] = {}
    every: Dict[str, List[dict]] = defaultdict(list)
    for ops, _context in devices:
        latest.update(ops)
        for key, events in ops.items():
            every[key].extend(events)
    documents = {"communication": lambda: communication(latest, devices[-1][1]),
                 "communication_matrix": lambda: matrix(every)}
    written = []
    for rule in rules:
        target = root / "analyze" / f"{rule}.json"
        refuse_links_below(root, target.parent)
        document = documents[rule]()
        if not document:
            continue
        with atomic_open(target) as handle:
            json.dump(document, handle)
        written.append(target)
    return written
