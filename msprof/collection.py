"""Find result directories and read their metadata (raw-format.md §1–3).

A *result directory* holds ``info.json*`` and a ``data/`` directory of raw files. This module knows
where things are and what the clock facts say; it decodes no binary records.
"""
import configparser
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from msprof.console import log
from msprof.decode.textinfo import read_text
from msprof.errors import DataError, NoCollectionError
from msprof.paths import inside, printable

_SKIP_DIRS = {"sqlite", "timeline", "summary", "log", "query", "mindstudio_profiler_output"}
_IGNORED_SUFFIXES = (".done", ".complete", ".zip")
# what a directory of a collection that is a symbolic link gets (raw-format.md §1)
LINK_NOT_FOLLOWED = "a symbolic link: not followed (a collection is read inside its directory only)"


def find_result_dirs(root: Path) -> List[Path]:
    """Every result directory at or under ``root`` (a JOB dir, a PROF_ dir, or a parent of several)."""
    root = Path(root)
    if not root.is_dir():
        raise NoCollectionError(f"{root} {'is not a directory' if os.path.lexists(root) else 'does not exist'}")
    found: List[Path] = []
    locked: List[Path] = []
    links: List[Path] = []
    _walk(root, found, depth=0, locked=locked, links=links)
    if not found and locked:        # (a collection may be there, that the user may not read)
        raise DataError.unreadable(locked[0], PermissionError(13, "Permission denied"))
    for directory in locked:        # (beside collections found: said, not passed over)
        log.warning("%s: cannot read (Permission denied): not searched for collections", directory)
    if not found and links:         # (or behind a link, which is not followed)
        raise DataError(f"{links[0]}: {LINK_NOT_FOLLOWED}")
    for link in links:              # (beside collections found: said, not passed over)
        log.warning("%s: %s", link, LINK_NOT_FOLLOWED)
    if not found:
        raise NoCollectionError(f"no info.json* found under {root} (expected a JOB or PROF_ directory)")
    return sorted(found, key=_device_order)


def _walk(directory: Path, found: List[Path], depth: int, locked: List[Path], links: List[Path]) -> None:
    if _has_info_json(directory):
        found.append(directory)
        return
    if depth > 4:
        return
    try:
        children = sorted(directory.iterdir())
    except PermissionError:
        locked.append(directory)
        return
    except OSError:
        return
    for child in children:
        if child.name in _SKIP_DIRS or child.name.startswith(".") or not os.path.isdir(child):
            continue
        if os.path.islink(child):
            links.append(child)
            continue
        _walk(child, found, depth + 1, locked, links)


def _has_info_json(directory: Path) -> bool:
    try:
        return any(p.name.startswith("info.json") and p.is_file() for p in directory.iterdir())
    except OSError:
        return False


def _device_order(path: Path):
    match = re.search(r"device_(\d+)$", path.name)
    return (str(path.parent), 1 if match else 0, int(match.group(1)) if match else 0, path.name)


def _collection_root(result_dir: Path) -> Path:
    """The collection a result directory belongs to: its PROF_ directory (host, device_N), or itself (JOB)."""
    return result_dir.parent if result_dir.parent.name.startswith("PROF_") else result_dir


def _followed(path: Path, root: Path) -> bool:
    """Whether ``path`` may be read as part of the collection at ``root``: it is no symbolic link, or one that
    leads inside the collection (raw-format.md §1: never out of it)."""
    if not os.path.islink(path):         # (never raises where the user may not look)
        return True
    try:
        return inside(path, root.resolve())
    except (OSError, RuntimeError):
        return False


def outside_links(result_dir: Path, directory: Optional[Path] = None) -> List[Path]:
    """The entries of ``directory`` (default <result dir>/data/) that are symbolic links out of the
    collection: never followed (raw-format.md §1), and said by the import."""
    result_dir = Path(result_dir)
    try:
        return [p for p in sorted(Path(directory or result_dir / "data").iterdir())
                if not _followed(p, _collection_root(result_dir))]
    except OSError:
        return []


def data_files(result_dir: Path, empty_ok: bool = False) -> List[Path]:
    """Raw files in <result dir>/data/, skipping markers, archives, empty files and links out of the
    collection. None is an error, unless ``empty_ok`` (a PROF device that recorded nothing, beside its host and
    other devices)."""
    result_dir = Path(result_dir)
    data = result_dir / "data"
    root = _collection_root(result_dir)
    if not _followed(data, root):
        raise DataError(f"{data}: a symbolic link out of the collection ({root}): not followed (raw data are read "
                        "inside the collection only)")
    if not data.is_dir():
        if empty_ok:
            return []
        raise DataError(f"{data}: raw data directory missing (nothing to import)")
    try:
        files = [p for p in sorted(data.iterdir())
                 if p.is_file() and not p.name.endswith(_IGNORED_SUFFIXES) and p.stat().st_size > 0
                 and _followed(p, root)]
    except OSError as exc:
        raise DataError.unreadable(exc.filename or data, exc) from None
    if not files and not empty_ok:
        raise DataError(f"{data}: raw data directory is empty (nothing to import)")
    return files


# what a file that is not a regular one is (by its stat mode), for the warning that names it
_SPECIAL = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
            (stat.S_ISSOCK, "a socket"))


def special_files(result_dir: Path) -> List[str]:
    """Warnings for the entries of <result dir>/data/ and of the result dir's metadata names that are FIFOs,
    devices or sockets: never opened (a FIFO would hang the import, a device feed it forever), and said rather
    than passed over."""
    said = []
    for directory, wanted in ((result_dir / "data", lambda name: True), (result_dir, _is_metadata_name)):
        try:
            entries = sorted(p for p in directory.iterdir() if wanted(p.name))
        except OSError:
            continue
        for entry in entries:
            try:
                mode = entry.stat().st_mode          # (a link inside the collection: what it names)
            except OSError:
                continue
            kind = next((what for test, what in _SPECIAL if test(mode)), None)
            if kind:
                said.append(f"{entry}: {kind}, not a regular file: not read")
    return said


def _is_metadata_name(name: str) -> bool:
    return name.startswith(_METADATA)


_METADATA = ("info.json", "sample.json", "start_info", "end_info", "dev_start.log", "host_start.log")


@dataclass
class ClockFacts:
    """The clock facts of a result directory (raw-format.md §3), which msprof.layouts.timebase converts with."""

    hwts_mhz: Optional[float]
    dev_cntvct: int = 0
    host_mono_ns: int = 0
    collection_begin_us: float = 0.0
    clock_monotonic_raw_ns: int = 0
    cpu_mhz: Optional[float] = None  # host timestamps are ticks when set
    # host_start.log's cntvct_diff in ns: the host counter's drift at the sync instant, which the reference
    # adds to clock_monotonic_raw for PROF_ data (docs/prof-format.md §4); the JOB formula has no such term
    host_diff_ns: int = 0
    # host_start.log's cntvct: the host counter at the sync instant (PROF_: where the collection's beginning
    # lies on the host's task_track clock)
    host_cntvct: int = 0
    # end_info's collectionTimeEnd as written (µs since the epoch), "" when it does not say
    collection_end: str = ""


@dataclass
class ResultDir:
    """The metadata of one result directory, read and checked (``read_result_dir``): every number is
    finite and within the bounds of what it is, so nothing later overflows or divides by zero."""

    path: Path
    device_id: str
    info: dict
    sample: dict
    clock: ClockFacts
    aic_mhz: Optional[float]
    ai_core_num: Optional[int]
    platform_version: str
    pid: Optional[int]
    drv_version: int = 0
    metadata_files: List[Path] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)


# Bounds of the metadata values (what a real value can be, with room): MHz, counters, ns, µs since the epoch.
MHZ = (1e-3, 1e6)
COUNTER = (0, (1 << 63) - 1)
SIGNED = (-(1 << 63), (1 << 63) - 1)
EPOCH_US = (0, 1e17)                # up to the year 5138


def read_result_dir(path: Path) -> ResultDir:
    """Read and check info.json*, sample.json, start_info and the sync logs of one result directory."""
    path = Path(path)
    info_path = _info_path(path)
    info = _read_json_first_line(info_path)
    device_id = printable_id(info.get("devices"), _suffix(info_path))
    suffix = _suffix(info_path)
    sample_path = path / "sample.json"
    has_sample = sample_path.is_file() and _followed(sample_path, _collection_root(path))
    sample = _read_json(sample_path) if has_sample else {}
    warnings: List[str] = []
    metadata = [info_path] + ([sample_path] if has_sample else [])
    for where, links in ((path / "data", outside_links(path)), (path, outside_links(path, path))):
        if links:
            warnings.append(f"{where}: {len(links)} symbolic link(s) out of the collection not read: "
                            + ", ".join(printable(p.name) for p in links[:5]) + (", …" if len(links) > 5 else ""))
    warnings += special_files(path)

    device_info = _first_object(info, "DeviceInfo", info_path)
    hwts_mhz = number(device_info, "hwts_frequency", info_path, MHZ)
    aic_mhz = number(device_info, "aic_frequency", info_path, MHZ)
    ai_core_num = number(device_info, "ai_core_num", info_path, (1, 1 << 20), integer=True)
    cpu = _first_object(info, "CPU", info_path)
    cpu_mhz = number(cpu, "Frequency", info_path, (0, 1e6)) or None     # empty or 0: host times are ns
    begin_us, mono_ns, end = _collection_start(path, suffix, metadata, warnings)
    dev_cntvct, host_mono, host_diff, host_cntvct = _sync_instant(path, suffix, cpu_mhz, metadata, warnings)
    clock = ClockFacts(hwts_mhz=hwts_mhz, dev_cntvct=dev_cntvct, host_mono_ns=host_mono,
                       collection_begin_us=begin_us, clock_monotonic_raw_ns=mono_ns, cpu_mhz=cpu_mhz,
                       host_diff_ns=host_diff, host_cntvct=host_cntvct, collection_end=end)
    pid = info.get("pid")
    try:
        pid = int(str(pid).strip()) if pid is not None and not isinstance(pid, bool) else None
    except ValueError:
        pid = None
    try:        # only decides how the reference would order tasks that start together: never fatal
        drv_version = number(info, "drvVersion", info_path, COUNTER, integer=True) or 0
    except DataError:
        drv_version = 0
    return ResultDir(path=path, device_id=device_id, info=info, sample=sample, clock=clock, aic_mhz=aic_mhz,
                     ai_core_num=ai_core_num, platform_version=str(info.get("platform_version", ""))[:64],
                     pid=pid if pid is not None and 0 <= pid < (1 << 31) else None, drv_version=drv_version,
                     metadata_files=metadata, warnings=warnings)


def _info_path(path: Path) -> Path:
    """The result directory's info.json* (NoCollectionError without one; DataError for one linked out)."""
    info_path = _first(path, "info.json")
    if info_path is None:
        linked = [p for p in outside_links(path, path) if p.name.startswith("info.json")]
        if linked:
            raise DataError(f"{linked[0]}: a symbolic link out of the collection ({_collection_root(path)}): not "
                            "followed (raw data and metadata are read inside the collection only)")
        raise NoCollectionError(f"no info.json* found under {path} (expected a JOB or PROF_ directory)")
    return info_path


def _collection_start(path: Path, suffix: Optional[str], metadata: List[Path], warnings: List[str]):
    """(collectionTimeBegin µs, clockMonotonicRaw ns) of start_info, (0.0, 0) without it, and end_info's
    collectionTimeEnd text ("" without it); start_info and end_info added to ``metadata``."""
    start_info = _first(path, "start_info", suffix)
    begin_us, mono_ns = 0.0, 0
    if start_info is None:
        warnings.append(f"{path}: no start_info file: times stay monotonic (offset 0)")
    else:
        metadata.append(start_info)
        start = _read_json(start_info)
        begin_us = number(start, "collectionTimeBegin", start_info, EPOCH_US) or 0.0
        mono_ns = number(start, "clockMonotonicRaw", start_info, COUNTER, integer=True) or 0
    end_info = _first(path, "end_info", suffix)
    end = ""
    if end_info is not None:
        metadata.append(end_info)
        try:         # (read for the CANN timeline's AI Core Freq only: a bad file or value stops nothing)
            values = _read_json(end_info)
            if number(values, "collectionTimeEnd", end_info, EPOCH_US) is not None:
                end = str(values["collectionTimeEnd"]).strip()[:32]
        except DataError as exc:
            warnings.append(f"{exc.message}: not used")
    return begin_us, mono_ns, end


def _sync_instant(path: Path, suffix: Optional[str], cpu_mhz: Optional[float], metadata: List[Path],
                  warnings: List[str]):
    """(dev_cntvct, host_mono_ns, host_diff_ns, host_cntvct): the device counter and the host's clock read at
    one instant, from dev_start.log and host_start.log (raw-format.md §2); zeros where they do not say."""
    dev_cntvct, host_mono, host_diff, host_cntvct = 0, 0, 0, 0
    dev_log = _first(path, "dev_start.log", suffix)
    host_log = _first(path, "host_start.log", suffix) or _first(path, "host_start.log")
    dev_values = _read_key_values(dev_log) if dev_log is not None else {}
    if dev_log is not None and host_log is None and "clock_monotonic_raw" in dev_values:
        # (dev_start.log has the host's clock at the sync instant too, raw-format.md §2: without host_start.log
        # the times are still the host's, not syscnt / frequency)
        metadata.append(dev_log)
        dev_cntvct = number(dev_values, "cntvct", dev_log, COUNTER, integer=True, required=True)
        host_mono = number(dev_values, "clock_monotonic_raw", dev_log, COUNTER, integer=True, required=True)
        warnings.append(f"{path}: no host_start.log: the host's clock at the sync instant taken from "
                        f"{dev_log.name} (a PROF_ device's times then lack host_start.log's cntvct_diff correction)")
    elif dev_log is not None and host_log is not None:
        metadata += [dev_log, host_log]
        dev_cntvct = number(dev_values, "cntvct", dev_log, COUNTER, integer=True, required=True)
        host_values = _read_ini_first_section(host_log)
        host_mono = number(host_values, "clock_monotonic_raw", host_log, COUNTER, integer=True, required=True)
        try:
            host_cntvct = number(host_values, "cntvct", host_log, COUNTER, integer=True) or 0
        except DataError:         # (0: not known; only the PROF_ single ops' block count filter needs it)
            host_cntvct = 0
        try:
            diff = number(host_values, "cntvct_diff", host_log, SIGNED, integer=True) or 0
        except DataError as exc:          # a correction the times can do without: said, not fatal
            warnings.append(f"{exc} (ignored: times without the host counter correction)")
            diff = 0
        host_diff = host_counter_ns(diff, cpu_mhz)
    else:
        warnings.append(f"{path}: no dev_start.log/host_start.log: device time = syscnt / hwts_frequency")
    return dev_cntvct, host_mono, host_diff, host_cntvct


def host_counter_ns(ticks: int, cpu_mhz: Optional[float]) -> int:
    """ns of ``ticks`` of the host counter, rounded as the reference rounds them: at CPU[0].Frequency MHz,
    or 1 GHz when the host gives none (its timestamps are then ns)."""
    hz = float(cpu_mhz) * 1e6 if cpu_mhz else 1e9
    return round(int(ticks) * 1e9 / hz) if ticks else 0


def number(values, key: str, source: Path, bounds, integer: bool = False, required: bool = False):
    """``values[key]`` (a JSON number, or a string holding one) as a number within ``bounds``; None when it
    is missing or empty (an error when ``required``). inf, NaN, 1e999, a 20-digit integer where a 64-bit one
    belongs, or anything out of bounds: DataError naming the file and the key."""
    raw = values.get(key) if isinstance(values, dict) else None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        if required:
            raise DataError(f"{source}: key {key!r} missing")
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise DataError(f"{source}: {key} is not a number: {_shown(raw)}")
    text = raw.strip() if isinstance(raw, str) else raw
    try:
        value = int(text) if integer and not isinstance(text, float) and _is_integer_text(text) else float(text)
    except (ValueError, OverflowError):
        raise DataError(f"{source}: {key} is not a number: {_shown(raw)}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(f"{source}: {key} is not a finite number: {_shown(raw)}")
    low, high = bounds
    if not low <= value <= high:
        raise DataError(f"{source}: {key} = {_shown(raw)} is out of range ({low:g} to {high:g})")
    return int(value) if integer else value


def _is_integer_text(text) -> bool:
    return isinstance(text, int) or (isinstance(text, str) and text.lstrip("+-").isdigit() and len(text) <= 40)


def _shown(raw) -> str:
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "..."


def _first_object(info: dict, key: str, source: Path) -> dict:
    """``info[key][0]`` (DeviceInfo, CPU), an object; {} when absent."""
    items = info.get(key)
    if items is None or items == []:
        return {}
    if not isinstance(items, list) or not isinstance(items[0], dict):
        raise DataError(f"{source}: {key}[0] is not an object")
    return items[0]


def printable_id(devices, suffix: Optional[str]) -> str:
    """The device id: the first of ``devices`` ("0", "0,1"), else the file suffix; digits only."""
    first = str(devices if devices is not None else (suffix or "0")).split(",")[0].strip()
    return first if first.isdigit() and len(first) <= 9 else (suffix if suffix and len(suffix) <= 9 else "0")


def require_hwts_frequency(result: ResultDir, what: str) -> float:
    if not result.clock.hwts_mhz:
        info = _first(result.path, "info.json")
        raise DataError(f"{info}: DeviceInfo[0].hwts_frequency missing or not a positive number "
                        f"(needed to convert {what} timestamps)")
    return result.clock.hwts_mhz


def _first(directory: Path, prefix: str, suffix: Optional[str] = None) -> Optional[Path]:
    root = _collection_root(directory)
    names = sorted(p for p in directory.iterdir() if p.is_file() and p.name.startswith(prefix)
                   and not p.name.endswith(_IGNORED_SUFFIXES) and _followed(p, root))
    if suffix is not None:
        exact = [p for p in names if p.name == f"{prefix}.{suffix}"]
        if exact:
            return exact[0]
    return names[0] if names else None


def _suffix(path: Path) -> Optional[str]:
    parts = path.name.split(".")
    return parts[-1] if len(parts) > 2 and parts[-1].isdigit() else None


def _read_json_first_line(path: Path) -> dict:
    """info.json* holds its object on the first line (later lines, if any, are not ours)."""
    return _read_json(path, first_line_only=True)


def _read_json(path: Path, first_line_only: bool = False) -> dict:
    text = read_text(path)
    if first_line_only:
        text = text.split("\n", 1)[0]
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        where = "" if exc.msg.endswith(" at") else " at"       # ("Unterminated string starting at")
        raise DataError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg}{where} column {exc.colno})") from None
    except RecursionError:
        raise DataError(f"{path}: invalid JSON (nested too deeply)") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: line 1: expected a JSON object")
    return value


def _read_key_values(path: Path) -> Dict[str, str]:
    values = {}
    for line in read_text(path).splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip().lower()] = value.strip()
    return values


def _read_ini_first_section(path: Path) -> Dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(read_text(path))
    except configparser.Error as exc:
        raise DataError(f"{path}: invalid INI ({exc.message.splitlines()[0]})") from None
    sections = parser.sections()
    if not sections:
        return _read_key_values(path)
    return {k.lower(): v.strip() for k, v in parser[sections[0]].items()}
