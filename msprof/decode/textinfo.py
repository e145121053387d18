"""Model description files in data/: ``<model>.<id>.net.info`` and ``<model>.<id>.layer.info`` (§5.1–5.2)."""
import csv
import io
import re
from pathlib import Path
from typing import Dict, List

from msprof.collection import read_text
from msprof.errors import DataError

NET_INFO = re.compile(r"^(?P<name>.+)\.(?P<id>\d+)\.net\.info$")
LAYER_INFO = re.compile(r"^(?P<name>.+)\.(?P<id>\d+)\.layer\.info$")
LAYER_COLUMNS = ["layer_id", "task_id", "stream_id", "layer_type", "layer_name", "ori_layer_name"]


def read_net_info(path: Path) -> Dict[str, str]:
    values = {}
    for number, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise DataError(f"{path}: line {number}: expected 'key: value', got {line[:60]!r}")
        values[key.strip()] = value.strip()
    return values


def model_row(path: Path, values: Dict[str, str]) -> dict:
    match = NET_INFO.match(path.name)
    row = {"model_id": _int(values.get("model_id"), path, "model_id", default=int(match.group("id"))),
           "model_name": values.get("model_name") or match.group("name"),
           "batch_num": _int(values.get("batch_num"), path, "batch_num", default=1),
           "input_pic_num": _int(values.get("input_pic_num"), path, "input_pic_num", default=None),
           "layer_num": _int(values.get("layer_num"), path, "layer_num", default=None)}
    return row


def read_layer_info(path: Path, model_id: int) -> List[tuple]:
    """Rows (model_id, layer_id, task_id, stream_id, layer_type, layer_name, ori_layer_name)."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        return []
    missing = [c for c in LAYER_COLUMNS if c not in header]
    if missing:
        raise DataError(f"{path}: line 1: header lacks column(s) {', '.join(missing)} "
                        f"(expected {','.join(LAYER_COLUMNS)})")
    index = {c: header.index(c) for c in LAYER_COLUMNS}
    rows = []
    for number, fields in enumerate(reader, 2):
        if not fields or not any(f.strip() for f in fields):
            continue
        if len(fields) < len(header):
            raise DataError(f"{path}: line {number}: {len(fields)} fields, expected {len(header)}")
        get = lambda c: fields[index[c]].strip()  # noqa: E731
        try:
            layer_id, task_id, stream_id = int(get("layer_id")), int(get("task_id")), int(get("stream_id"))
        except ValueError:
            raise DataError(f"{path}: line {number}: layer_id, task_id and stream_id must be integers") from None
        name = get("layer_name")
        rows.append((model_id, layer_id, task_id, stream_id, get("layer_type"), name, get("ori_layer_name") or name))
    return rows


def _int(value, path, key, default):
    if value is None or value == "":
        return default
    try:
        return int(float(value))
    except ValueError:
        raise DataError(f"{path}: {key} is not a number: {value!r}") from None
