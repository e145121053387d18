"""Memory of a PROF_: the device's npu_mem and npu_module_mem samples and the host's GE allocations
(task_memory_info), printed as the reference's npu_mem, npu_module_mem, memory_record and operator_memory
(docs/prof-format.md, "Memory"). The reference prints the host's GE records in every device's files (they are
not filtered by device), each device's with its own Device_id.
"""
from decimal import Decimal
from typing import Dict, List, Optional, Tuple

from msprof.decode.compact import CompactDecoder
from msprof.decode.memory import MODULE_MEM_COLUMNS, NPU_MEM_COLUMNS, TASK_MEMORY, ModuleMemDecoder, NpuMemDecoder
from msprof.layouts.prof.families.base import Context, Family, kinds
from msprof.store import TableDef

NPU_MEM_HEADERS = ["event", "ddr(KB)", "hbm(KB)", "memory(KB)", "timestamp(us)"]
MODULE_HEADERS = ["Component", "Timestamp(us)", "Total Reserved(KB)", "Device"]
RECORD_HEADERS = ["Component", "Timestamp(us)", "Total Allocated(KB)", "Total Reserved(KB)", "Device"]
OPERATOR_HEADERS = ["Name", "Size(KB)", "Allocation Time(us)", "Duration(us)", "Allocation Total Allocated(KB)",
                    "Allocation Total Reserved(KB)", "Release Total Allocated(KB)", "Release Total Reserved(KB)",
                    "Device"]
EVENTS = {0: "APP", 1: "Device"}
# the software modules of npu_module_mem (the reference's names; another id prints "other")
MODULES = {0: "SLOG", 1: "IDEDD", 2: "SCC", 3: "HCCL", 4: "FMK", 5: "CCU", 6: "DVPP", 7: "RUNTIME", 8: "CCE", 9: "HDC",
           10: "DRV", 11: "NET", 22: "DEVMM", 23: "KERNEL", 24: "LIBMEDIA", 25: "CCECPU", 27: "ROS", 28: "HCCP",
           29: "ROCE", 30: "TEFUSION", 31: "PROFILING", 32: "DP", 33: "APP", 34: "TS", 35: "TSDUMP", 36: "AICPU",
           37: "LP", 38: "TDT", 39: "FE", 40: "MD", 41: "MB", 42: "ME", 43: "IMU", 44: "IMP", 45: "GE", 47: "CAMERA",
           48: "ASCENDCL", 49: "TEEOS", 50: "ISP", 51: "SIS", 52: "HSM", 53: "DSS", 54: "PROCMGR", 55: "BBOX",
           56: "AIVECTOR", 57: "TBE", 58: "FV", 60: "TUNE", 61: "HSS", 62: "FFTS", 63: "OP", 64: "UDF", 65: "HICAID",
           66: "TSYNC", 67: "AUDIO", 68: "TPRT", 69: "ASCENDCKERNEL", 70: "ASYS", 71: "ATRACE", 72: "RTC",
           73: "SYSMONITOR", 74: "AML", 75: "ADETECT", 76: "MBUFF", 77: "CUSTOM"}

DEVICE = Family("memory", "device", kinds((r"^npu_mem\.data(\.\d+)?$", "npu_mem"),
                                          (r"^npu_module_mem\.data(\.\d+)?$", "npu_module_mem")),
                {"npu_mem": TableDef({c: int for c in NPU_MEM_COLUMNS}),
                 "npu_module_mem": TableDef({c: int for c in MODULE_MEM_COLUMNS})},
                {"npu_mem": lambda item: NpuMemDecoder(), "npu_module_mem": lambda item: ModuleMemDecoder()})
HOST = Family("task_memory", "host", kinds((r"^(un)?aging\.additional\.task_memory_info$", "task_memory")),
              {"task_memory": TableDef({f: int for f in TASK_MEMORY.layout.fields})},
              {"task_memory": lambda item: CompactDecoder(TASK_MEMORY)})


def npu_mem_rows(conn, context: Context) -> Tuple[List[str], List[List[str]]]:
    """npu_mem: the samples in file order, sizes in KB (Python's round to 3 decimals), the time as the
    reference makes it absolute (in floats: at 1.7e18 ns their step is 256 ns, which shows)."""
    field = "ts_v2" if str(context.result.info.get("version", "")) == "2.0" else "ts_v1"
    rows = []
    for ts, event, ddr, hbm in conn.execute(f"SELECT {field}, event, ddr, hbm FROM npu_mem ORDER BY rowid"):
        rows.append([EVENTS.get(event, ""), _kb(ddr), _kb(hbm), _kb(ddr + hbm), sample_text(context, ts)])
    return NPU_MEM_HEADERS, rows


def sample_text(context: Context, ts: int) -> str:
    """An npu_mem sample's time as the reference prints it (its file's and its timeline's)."""
    return str((Decimal(str(_sample_ns(context, ts))) / 1000).quantize(Decimal("0.000")))


def _sample_ns(context: Context, ts: int) -> int:
    dev_mono = context.dev_mono_ns
    delta = context.mono_s - dev_mono / 1000000000
    return int(ts * 1000 + dev_mono + delta * 1000000000 + context.offset_us * 1000)


def module_rows(conn, context: Context) -> Tuple[List[str], List[List[str]]]:
    """npu_module_mem: by module id, then time; a size of 0 or less printed as it is."""
    device = f"NPU:{context.device_id}"
    rows = []
    for module, syscnt, size in conn.execute("SELECT module_id, syscnt, total_size FROM npu_module_mem"
                                             " ORDER BY module_id, syscnt"):
        rows.append([MODULES.get(module, "other"), context.local_text(context.host_us(syscnt)),
                     _kb(size) if size > 0 else str(size), device])
    return MODULE_HEADERS, rows


def record_rows(conn, host: Context, schema: str = "host") -> Tuple[List[str], List[List[str]]]:
    """memory_record: every GE allocation and free of the host, in file order (``host``: the host's clock)."""
    rows = [["GE", host.host_text(ts), _kb(allocated), _kb(reserved), f"NPU:{device}"]
            for ts, allocated, reserved, device in conn.execute(
                f"SELECT ts, total_allocated, total_reserved, device_id FROM {schema}.task_memory ORDER BY rowid")]
    return RECORD_HEADERS, rows


def operator_rows(conn, host: Context, schema: str = "host") -> Tuple[List[str], List[List[str]]]:
    """operator_memory: each allocation with the free of the same (op, address, device) after it, in the
    order of the frees, then the allocations never freed (release columns 0)."""
    names = dict(conn.execute(f"SELECT hash, text FROM {schema}.hash_string"))
    allocated: Dict[tuple, tuple] = {}
    rows = []
    for ts, size, node, addr, total, reserved, device in conn.execute(
            f"SELECT ts, size, node_hash, addr, total_allocated, total_reserved, device_id FROM {schema}.task_memory"
            " ORDER BY rowid"):
        key = (node, addr, device)
        if size > 0:
            allocated[key] = (size, ts, total, reserved)
        elif size < 0 and key in allocated:
            rows.append(_operator(names, host, node, device, allocated.pop(key), (ts, total, reserved)))
    rows += [_operator(names, host, node, device, value, None) for (node, _a, device), value in allocated.items()]
    return OPERATOR_HEADERS, rows


def _operator(names, host: Context, node: int, device: int, allocation: tuple, free: Optional[tuple]) -> list:
    size, ts, total, reserved = allocation
    release = free or (ts, 0, 0)
    duration = host.host_duration_us(release[0] - ts) if free else 0.0
    return [names.get(node, ""), _kb(size), host.host_text(ts), repr(round(duration, 3)), _kb(total),
            _kb(reserved), _kb(release[1]), _kb(release[2]), f"NPU:{device}"]


def _kb(value: int) -> str:
    return repr(round(value / 1024.0, 3))
