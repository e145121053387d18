"""Model description files in data/: ``<model>.<id>.net.info`` and ``<model>.<id>.layer.info`` (§5.1–5.2), and
``read_text``, how every small text file of a collection (these, and the metadata) is read."""
import csv
import io
import re
from pathlib import Path
from typing import Dict, List

from msprof.errors import DataError

NET_INFO = re.compile(r"^(?P<name>.+)\.(?P<id>\d+)\.net\.info$")
LAYER_INFO = re.compile(r"^(?P<name>.+)\.(?P<id>\d+)\.layer\.info$")
LAYER_COLUMNS = ["layer_id", "task_id", "stream_id", "layer_type", "layer_name", "ori_layer_name"]


INT64 = (0, (1 << 63) - 1)
# metadata and model description files are small; a larger one is not one (and is not read whole)
MAX_METADATA_BYTES = 16 << 20


def read_text(path: Path) -> str:
    """A small text file whole (bytes that are not UTF-8 replaced); DataError naming it when it is too large
    or unreadable."""
    try:
        if path.stat().st_size > MAX_METADATA_BYTES:
            raise DataError(f"{path}: {path.stat().st_size} bytes: too large for a metadata file")
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise DataError.unreadable(path, exc) from None


class BadLines:
    """Lines of a text file that are skipped: counted, the first kept for the one warning per file."""

    def __init__(self, path: Path):
        self.path, self.count, self.first = path, 0, None

    def add(self, number, why: str) -> None:
        """``number``: the line, or None for a value met after reading the lines."""
        self.count += 1
        if self.first is None:
            self.first = why if number is None else f"line {number}: {why}"

    def warning(self):
        if self.count:
            return f"{self.path.name}: {self.count} bad line(s) skipped (first: {self.first})"
        return None


def read_net_info(path: Path, bad: BadLines) -> Dict[str, str]:
    values = {}
    for number, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            bad.add(number, f"expected 'key: value', got {line[:60]!r}")
            continue
        values[key.strip()] = value.strip()
    return values


# the keys raw-format.md §5.1 gives every net.info (model_name may be left to the file's name)
NET_INFO_KEYS = ("model_id", "batch_num", "input_pic_num", "layer_num")


def missing_keys(values: Dict[str, str]) -> List[str]:
    """The keys of NET_INFO_KEYS a net.info lacks (a file cut short, most likely)."""
    return [key for key in NET_INFO_KEYS if key not in values]


def model_row(path: Path, values: Dict[str, str], bad: BadLines) -> dict:
    match = NET_INFO.match(path.name)
    file_id = _int(match.group("id"), INT64)
    row = {"model_id": _value(values, "model_id", file_id, bad),
           "model_name": values.get("model_name") or match.group("name"),
           "batch_num": _value(values, "batch_num", 1, bad, (1, 1 << 31)),
           "input_pic_num": _value(values, "input_pic_num", None, bad),
           "layer_num": _value(values, "layer_num", None, bad)}
    return row


def _value(values: Dict[str, str], key: str, default, bad: BadLines, bounds=INT64):
    """An integer field of net.info; an unreadable or out-of-range value keeps the default (counted)."""
    text = values.get(key)
    if text is None or text == "":
        return default
    number = _int(text, bounds)
    if number is None:
        bad.add(None, f"{key} is not a number in range: {text[:40]!r}")
        return default
    return number


def _int(text, bounds):
    try:
        value = float(text) if "." in str(text) or "e" in str(text).lower() else int(str(text).strip())
    except (ValueError, OverflowError):
        return None
    if value != value or value in (float("inf"), float("-inf")) or not bounds[0] <= value <= bounds[1]:
        return None
    return int(value)


def read_layer_info(path: Path, model_id: int, bad: BadLines) -> List[tuple]:
    """Rows (model_id, layer_id, task_id, stream_id, layer_type, layer_name, ori_layer_name); a line that
    does not hold a layer is skipped and counted in ``bad``."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except (StopIteration, csv.Error):
        return []
    missing = [c for c in LAYER_COLUMNS if c not in header]
    if missing:
        raise DataError(f"{path}: line 1: header lacks column(s) {', '.join(missing)} "
                        f"(expected {','.join(LAYER_COLUMNS)})")
    index = {c: header.index(c) for c in LAYER_COLUMNS}
    rows = []
    number = 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            number += 1
            bad.add(number, f"not CSV ({exc})")
            continue
        number += 1
        if not fields or not any(f.strip() for f in fields):
            continue
        if len(fields) < len(header):
            bad.add(number, f"{len(fields)} fields, expected {len(header)}")
            continue
        ids = [_int(fields[index[c]].strip(), (0, (1 << 31) - 1)) for c in ("layer_id", "task_id", "stream_id")]
        if None in ids:
            bad.add(number, "layer_id, task_id and stream_id must be integers")
            continue
        # (texts as they are: in RFC 4180 spaces belong to the field — " conv1 " is a name of its own)
        name = fields[index["layer_name"]]
        rows.append((model_id, *ids, fields[index["layer_type"]], name, fields[index["ori_layer_name"]] or name))
    return rows
