"""Several units' output files appended into one file per kind: a PROF_'s devices in the CANN layout
(``Target.merged``; docs/prof.md "The CANN layout"), where the Ascend tools read them.

Each unit's files are written as temporaries by the usual writers (summary.stage_summary, trace.write_timelines
with a set to stage in) and handed to ``Merged.add``; ``commit`` joins them kind by kind into
``<kind>_<stamp>.<ext>`` and puts the lot in place of the earlier files as one set (msprof.outputs.FileSet):

* a csv file: the first unit's header once, then every unit's rows in the units' order (a unit whose header
  differs cannot be appended: its columns would be misread);
* a timeline, a JSON array (trace.Writer without otherData): the units' events in one array; a unit's timeline
  cut into slices keeps them, numbered ``<kind>_slice_<k>_<stamp>.json`` over the units;
* a kind without a row or event gets no file, as from the reference;
* a joined timeline is checked before it is put in place (its devices' files alone are not: a device's flows
  begin at host calls written with the first device).

Once the new files are in place, every file of the kinds written with any earlier stamp is removed (the readers
take every file matching a kind's pattern, so an older one beside the new would count twice), and so are the
files of msprof's previous merged export (its ``manifest``) of kinds not written again. Until then nothing
earlier is touched; leaving the block without a commit removes the temporaries.
"""
import csv
import json
import os
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from msprof import trace
from msprof.console import log, notice
from msprof.errors import DataError
from msprof.outputs import FileSet, atomic_path, naming_errors, output_dir, temporary
from msprof.renderers.base import copy
from msprof.tracecheck import TraceError, check_trace

# A joined timeline is checked (msprof.tracecheck, read whole) up to this size, about trace.CHECK_MAX_EVENTS
# events, or whatever its size with ``check_all``
CHECK_MAX_BYTES = 32 << 20

# a selection's suffix of a summary file's name (docs/prof.md), and a timeline's slice number
_SELECTED = re.compile(r"(?:_model\d+)?(?:_iter\d+)?$")
_SLICE = re.compile(r"_slice_\d+$")


class Merged:
    def __init__(self, directory: Path, stamp: str, manifest: Optional[Path], check_all: bool = False,
                 tables_as: str = "csv"):
        self.directory, self.stamp, self.check_all = Path(directory), stamp, check_all
        self.tables_as = tables_as          # json: the csv tables written as the CANN msprof's json arrays
        self.files = FileSet(self.directory, manifest)
        self.parts: Dict[Tuple[str, str], List[Tuple[Path, bool]]] = {}   # (kind, ext) → (temporary, a slice)

    def __enter__(self) -> "Merged":
        return self

    def __exit__(self, *exc) -> bool:
        self.discard()
        return False

    def add(self, staged: List[Tuple[str, str]]) -> None:
        """A unit's files, (temporary, name) each, in order."""
        for tmp, name in staged:
            stem, extension = Path(name).stem, Path(name).suffix
            kind = _SLICE.sub("", _SELECTED.sub("", stem))
            self.parts.setdefault((kind, extension), []).append((Path(tmp), kind != stem and "_slice_" in stem))

    def commit(self) -> List[Path]:
        """Put the merged files in place of the earlier ones; return them."""
        kinds = []
        for (kind, extension), parts in self.parts.items():
            sliced = any(is_slice for _tmp, is_slice in parts)
            groups = [[tmp] for tmp, _s in parts] if sliced else [[tmp for tmp, _s in parts]]
            for k, group in enumerate(groups):
                written_as = ".json" if extension == ".csv" and self.tables_as == "json" else extension
                name = f"{kind}_slice_{k}_{self.stamp}{written_as}" if sliced else f"{kind}_{self.stamp}{written_as}"
                if self._join(group, name, extension, kind if written_as != extension else None):
                    kinds.append(kind)
        self.parts = {}
        if kinds:
            self.files.replaces = re.compile(r"(?:%s)_(?:slice_\d+_)?\d{14}\.\w+" % "|".join(map(re.escape, kinds)))
        written = self.files.commit()
        for path in written:
            log.info("wrote %s", path)
        said = self.files.removed_notice("earlier file(s) of these kinds")
        if said:
            notice(said)
        return written

    def _join(self, parts: List[Path], name: str, extension: str, table: Optional[str] = None) -> bool:
        """The parts into a temporary of ``name``, staged when it holds a row or an event (``table``: a csv
        table's kind, written as a json array)."""
        tmp = temporary(output_dir(self.directory), name)
        try:
            with naming_errors(self.directory / name), open(tmp, "wb") as out:
                join = _append_array if extension == ".json" else _append_rows
                content = join(parts, out, self.directory / name)
            if table is not None:
                with naming_errors(self.directory / name):
                    _as_json(tmp, table)
        except BaseException:
            tmp.unlink()
            raise
        if content and extension == ".json" and trace.CHECK_FILES and (
                self.check_all or os.path.getsize(tmp) <= CHECK_MAX_BYTES):
            problems = check_trace(tmp)
            if problems:
                tmp.unlink()
                raise TraceError(f"internal error: {name} breaks the trace rules: " + "; ".join(problems[:5]))
        if content:
            self.files.adopt([(tmp, name)])
        else:
            tmp.unlink()
            log.info("%s: no row, not written", name)
        return content

    def discard(self) -> None:
        for tmp, _slice in (part for parts in self.parts.values() for part in parts):
            tmp.unlink(missing_ok=True)
        self.parts = {}
        self.files.discard()


def _append_rows(parts: List[Path], out, target: Path) -> bool:
    """csv files: the first one's header, every one's rows; whether there was a row."""
    header, rows = None, False
    for part in parts:
        with open(part, "rb") as handle:
            first = handle.readline()
            if header is None:
                header = first
                out.write(first)
            elif first != header:
                raise DataError(f"{target}: the devices' tables have different columns (metric sets or chips differ"
                                "), so they cannot be one file; `msprof export summary` writes one per device")
            body, size = handle.tell(), os.fstat(handle.fileno()).st_size
            copy(handle, out, body, size)
            rows = rows or size > body
        part.unlink()
    return rows


def _append_array(parts: List[Path], out, target: Path) -> bool:
    """Timelines, JSON arrays of one event a line with their metadata first (trace.Writer): every part's
    metadata, then every part's other events, as one array; whether there was an event. Only the metadata
    lines are read; the events are copied in blocks."""
    metadata, bodies = [], []
    for part in parts:
        with open(part, "rb") as handle:
            if handle.readline().strip() != b"[":
                raise DataError(f"{target}: {part.name} is not a timeline of the CANN layout (internal error)")
            body = handle.tell()
            for line in iter(handle.readline, b""):
                text = line.strip()
                if text and not text.startswith(b'{"ph":"M"'):
                    break
                if text:
                    metadata.append(text.rstrip(b","))
                body = handle.tell()
            bodies.append((part, body, os.fstat(handle.fileno()).st_size - len(b"\n]\n")))
    out.write(b"[\n" + b",\n".join(metadata))
    events = False
    for part, begin, end in bodies:
        if end > begin:
            with open(part, "rb") as handle:
                handle.seek(begin)
                out.write(b",\n" if metadata or events else b"")
                copy(handle, out, begin, end)
            events = True
        part.unlink()
    out.write(b"\n]\n")
    return events



# The CANN msprof's json summary (``--summary-format=json``): the rows of its tables as json.dump writes its
# Python values, each an object keyed by the titles (no Device_id); the values read from the csv text as numbers
# where they are numbers, but these cells, which are text there (the absolute times end with a TAB)
JSON_AS_TEXT = {("op_summary", "Task Start Time(us)"): "\t", ("task_time", "task_start(us)"): "\t",
                ("task_time", "task_stop(us)"): "\t", ("op_statistic", "Count"): ""}
_INT, _FLOAT = re.compile(r"-?[0-9]+"), re.compile(r"-?[0-9]+\.[0-9]+")


def _as_json(path: Path, table: str) -> None:
    """A joined csv table (``path``) rewritten in place as the CANN msprof's json array of its rows, streamed."""
    written = temporary(path.parent, path.name)
    try:
        with open(path, newline="", encoding="utf-8") as rows, open(written, "w", encoding="utf-8") as out:
            reader = csv.reader(rows)
            titles = next(reader, [])
            keep = [k for k, title in enumerate(titles) if title != "Device_id"]
            suffixes = [JSON_AS_TEXT.get((table, titles[k])) for k in keep]
            out.write("[")
            for n, row in enumerate(reader):
                item = {titles[k]: (_number(row[k]) if suffix is None else row[k] + suffix)
                        for k, suffix in zip(keep, suffixes)}
                out.write((", " if n else "") + json.dumps(item, ensure_ascii=False))
            out.write("]")
        os.replace(written, path)
    finally:
        written.unlink(missing_ok=True)


def _number(text: str):
    """A cell as the reference's value: an int or a float where the text is one, else the text."""
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


# README.txt of the CANN layout's directory (the reference writes one beside its files, no reader reads it): the
# kinds found there, the timeline's then the tables', numbered as the reference numbers them; msprof's own words
README = "README.txt"
_KIND_OF_FILE = re.compile(r"^(?P<kind>[a-z_]+?)(?:_slice_\d+)?_\d{14}\.(?P<ext>json|csv)$")
DESCRIPTIONS = {
    "msprof": "The timeline, a JSON array of trace events (chrome://tracing, ui.perfetto.dev, MindStudio Insight): "
              "the host's API calls (CANN), each device's tasks (Ascend Hardware), the union of its tasks and the "
              "gaps between them (Overlap Analysis), AI Core frequency samples (AI Core Freq), and a HostToDevice "
              "flow from each launch to its task.",
    "op_summary": "One row per device task an op launched: its op, type, task type, start (µs since the epoch), "
                  "duration and wait in µs, block count, tensors and the AI Core PMU metrics.",
    "op_statistic": "Per op type and core type: count and total, minimum, average and maximum time in µs, and the "
                    "share of the total time.",
    "api_statistic": "Per API level and name: the host's calls, their total, average, minimum and maximum time "
                     "in µs, and variance.",
    "task_time": "One row per device task: its kernel, task type, stream, task id, start, stop and duration.",
}
_SECTIONS = (("json", "Timeline file description:\n"), ("csv", "Summary file description:\n"))


def write_readme(directory: Path) -> Optional[Path]:
    """README.txt describing the kinds of file in ``directory`` (replaced whole); None when there is none."""
    found: Dict[str, List[str]] = {}
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else ():
        match = _KIND_OF_FILE.match(name)
        if match and match["kind"] not in found.get(match["ext"], []):
            found.setdefault(match["ext"], []).append(match["kind"])
    if not found:
        return None
    order = list(DESCRIPTIONS)
    text = ""
    for extension, title in _SECTIONS:
        kinds = sorted(found.get(extension, []), key=lambda k: (order.index(k) if k in order else len(order), k))
        text += title + "".join(f"{k}.{kind}.{extension}:{DESCRIPTIONS.get(kind, 'Written by msprof.')}\n"
                                for k, kind in enumerate(kinds, 1)) + "\n"
    target = Path(directory) / README
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target
