"""Find result directories and read their metadata (raw-format.md §1–3).

A *result directory* holds ``info.json*`` and a ``data/`` directory of raw files. This module knows
where things are and what the clock facts say; it decodes no binary records.
"""
import configparser
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from msprof.errors import DataError, NoCollectionError

_SKIP_DIRS = {"sqlite", "timeline", "summary", "log", "query", "mindstudio_profiler_output"}
_IGNORED_SUFFIXES = (".done", ".complete", ".zip")


def find_result_dirs(root: Path) -> List[Path]:
    """Every result directory at or under ``root`` (a JOB dir, a PROF_ dir, or a parent of several)."""
    root = Path(root)
    if not root.is_dir():
        raise NoCollectionError(f"{root} is not a directory")
    found = []
    _walk(root, found, depth=0)
    if not found:
        raise NoCollectionError(f"no info.json* found under {root} (expected a JOB or PROF_ directory)")
    return sorted(found, key=_device_order)


def _walk(directory: Path, found: List[Path], depth: int) -> None:
    if _has_info_json(directory):
        found.append(directory)
        return
    if depth > 4:
        return
    try:
        children = sorted(directory.iterdir())
    except OSError:
        return
    for child in children:
        if child.is_symlink() or not child.is_dir() or child.name in _SKIP_DIRS or child.name.startswith("."):
            continue
        _walk(child, found, depth + 1)


def _has_info_json(directory: Path) -> bool:
    try:
        return any(p.name.startswith("info.json") and p.is_file() for p in directory.iterdir())
    except OSError:
        return False


def _device_order(path: Path):
    match = re.search(r"device_(\d+)$", path.name)
    return (str(path.parent), 1 if match else 0, int(match.group(1)) if match else 0, path.name)


def data_files(result_dir: Path) -> List[Path]:
    """Raw files in <result dir>/data/, skipping markers, archives and empty files."""
    data = Path(result_dir) / "data"
    if not data.is_dir():
        raise DataError(f"{data}: raw data directory missing (nothing to import)")
    files = [p for p in sorted(data.iterdir())
             if p.is_file() and not p.is_symlink() and not p.name.endswith(_IGNORED_SUFFIXES)
             and p.stat().st_size > 0]
    if not files:
        raise DataError(f"{data}: raw data directory is empty (nothing to import)")
    return files


@dataclass
class Clock:
    """Converts device counters and host timestamps to output µs (raw-format.md §3)."""

    hwts_mhz: Optional[float]
    dev_cntvct: int = 0
    host_mono_ns: int = 0
    collection_begin_us: float = 0.0
    clock_monotonic_raw_ns: int = 0
    cpu_mhz: Optional[float] = None  # host timestamps are ticks when set

    def syscnt_to_ns(self, syscnt: int) -> float:
        return (syscnt - self.dev_cntvct) * 1000.0 / self.hwts_mhz + self.host_mono_ns

    def host_to_ns(self, value: int) -> float:
        return value * 1000.0 / self.cpu_mhz if self.cpu_mhz else float(value)

    @property
    def offset_us(self) -> float:
        """Add to host-monotonic µs to get µs since the epoch."""
        return self.collection_begin_us - self.clock_monotonic_raw_ns / 1000.0


@dataclass
class ResultDir:
    path: Path
    layout: str  # "JOB" (SS928 device dir), "PROF_HOST" or "PROF_DEVICE"
    device_id: str
    info: dict
    sample: dict
    clock: Clock
    aic_mhz: Optional[float]
    ai_core_num: Optional[int]
    platform_version: str
    pid: Optional[int]
    metadata_files: List[Path] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)


def read_result_dir(path: Path) -> ResultDir:
    """Read info.json*, sample.json, start_info and the sync logs of one result directory."""
    path = Path(path)
    info_path = _first(path, "info.json")
    if info_path is None:
        raise NoCollectionError(f"no info.json* found under {path} (expected a JOB or PROF_ directory)")
    info = _read_json_first_line(info_path)
    device_id = str(info.get("devices", _suffix(info_path) or "0")).split(",")[0].strip() or "0"
    suffix = _suffix(info_path)
    sample_path = path / "sample.json"
    sample = _read_json(sample_path) if sample_path.is_file() else {}
    warnings: List[str] = []
    metadata = [info_path] + ([sample_path] if sample_path.is_file() else [])

    device_info = (info.get("DeviceInfo") or [{}])[0] if isinstance(info.get("DeviceInfo"), list) else {}
    hwts_mhz = _number(device_info.get("hwts_frequency"))
    aic_mhz = _number(device_info.get("aic_frequency"))
    cpu = (info.get("CPU") or [{}])[0] if isinstance(info.get("CPU"), list) else {}
    cpu_mhz = _number(cpu.get("Frequency"))
    cpu_mhz = cpu_mhz if cpu_mhz and cpu_mhz > 0 else None

    start_info = _first(path, "start_info", suffix)
    begin_us, mono_ns = 0.0, 0
    if start_info is None:
        warnings.append(f"{path}: no start_info file: times stay monotonic (offset 0)")
    else:
        metadata.append(start_info)
        start = _read_json(start_info)
        begin_us = _number(start.get("collectionTimeBegin")) or 0.0
        mono_ns = int(_number(start.get("clockMonotonicRaw")) or 0)
    end_info = _first(path, "end_info", suffix)
    if end_info is not None:
        metadata.append(end_info)

    dev_cntvct, host_mono = 0, 0
    dev_log = _first(path, "dev_start.log", suffix)
    host_log = _first(path, "host_start.log", suffix) or _first(path, "host_start.log")
    if dev_log is not None and host_log is not None:
        metadata += [dev_log, host_log]
        dev_values = _read_key_values(dev_log)
        host_values = _read_ini_first_section(host_log)
        dev_cntvct = _required_int(dev_values, "cntvct", dev_log)
        host_mono = _required_int(host_values, "clock_monotonic_raw", host_log)
    else:
        warnings.append(f"{path}: no dev_start.log/host_start.log: device time = syscnt / hwts_frequency")

    clock = Clock(hwts_mhz=hwts_mhz, dev_cntvct=dev_cntvct, host_mono_ns=host_mono,
                  collection_begin_us=begin_us, clock_monotonic_raw_ns=mono_ns, cpu_mhz=cpu_mhz)
    layout = "JOB"
    if path.name == "host" and path.parent.name.startswith("PROF_"):
        layout = "PROF_HOST"
    elif path.name.startswith("device_") and path.parent.name.startswith("PROF_"):
        layout = "PROF_DEVICE"
    return ResultDir(path=path, layout=layout, device_id=device_id, info=info, sample=sample, clock=clock,
                     aic_mhz=aic_mhz, ai_core_num=_int_or_none(device_info.get("ai_core_num")),
                     platform_version=str(info.get("platform_version", "")),
                     pid=_int_or_none(info.get("pid")), metadata_files=metadata, warnings=warnings)


def require_hwts_frequency(result: ResultDir, what: str) -> float:
    if not result.clock.hwts_mhz or result.clock.hwts_mhz <= 0:
        info = _first(result.path, "info.json")
        raise DataError(f"{info}: DeviceInfo[0].hwts_frequency missing or not a positive number "
                        f"(needed to convert {what} timestamps)")
    return result.clock.hwts_mhz


def _first(directory: Path, prefix: str, suffix: Optional[str] = None) -> Optional[Path]:
    names = sorted(p for p in directory.iterdir() if p.is_file() and p.name.startswith(prefix)
                   and not p.name.endswith(_IGNORED_SUFFIXES))
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
        raise DataError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: line 1: expected a JSON object")
    return value


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None


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


def _required_int(values: Dict[str, str], key: str, path: Path) -> int:
    number = _number(values.get(key))
    if number is None:
        raise DataError(f"{path}: key {key!r} missing or not a number")
    return int(number)


def _number(value) -> Optional[float]:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if number == number else None  # NaN is not a frequency


def _int_or_none(value) -> Optional[int]:
    number = _number(value)
    return int(number) if number is not None else None
