"""The contract between the input layouts and the one pipeline.

```
raw files ─► decoders ─► store ─► Report ─► writers (summary files, timelines, show, query, compare, advise)
               ▲           ▲        ▲          ▲
               └───────────┴────────┴──────────┴── a Layout says which, for its result directories
```

A layout (msprof.layouts.job, msprof.layouts.prof) implements ``Layout`` and nothing else: every call the
pipeline (msprof.api) makes of a layout is a method of that class. The pipeline hands a layout result
directories and gets back:

* ``Unit``s, what every command loops over (a JOB directory; a PROF_ device with its host), each with its
  ``Database``s: where they go and a function that builds one (msprof.store does the rest);
* ``Target``s, the sets of output files (summary/, timeline/) and the units whose reports fill them;
* per unit, a ``Report`` over its databases (a subclass of the one below), and from it:
  the ``SummaryFile``s to write, the ``Timeline``s (each a list of ``EventSource``s the trace writer merges),
  the tables of show and query (msprof.tables.Table) and the ``Facts`` compare and advise read.

What a layout hands over is described, never done: the writers do the writing, slicing, parallel work and
file handling for every layout. Functions are passed as references (``SummaryFile.table``: a report method
such as ``ProfReport.op_summary``), never as names.

What comes next fits here without a new shape: a target of several units (a PROF_'s devices, whose files
hold every device's rows: each unit's report fills its part of a file in turn); more summary files, tables
and timeline sources per layout (more entries in the lists a layout returns); a third layout (one more
``Layout`` subclass in msprof.layouts.LAYOUTS); another way to select (one more field of ``Selection``).
"""
import abc
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, NamedTuple, Optional, Tuple, Union

from msprof import store
from msprof.collection import data_files, read_result_dir
from msprof.console import log
from msprof.errors import MsprofError, UsageError
from msprof.tables import Column, Table

if TYPE_CHECKING:       # (the analysis is above this module: named for the reader only)
    from msprof.analysis.facts import Facts


class Selection(NamedTuple):
    """--model-id / --iteration-id: both, neither, or --iteration-id alone where a result dir has one model
    (``check``; ``Report.resolve`` names the model)."""

    model_id: Optional[int] = None
    iteration_id: Optional[int] = None

    @property
    def everything(self) -> bool:
        return self.model_id is None and self.iteration_id is None

    def check(self) -> "Selection":
        if self.model_id is not None and self.iteration_id is None:
            raise UsageError("--model-id goes with --iteration-id: give both, --iteration-id alone (one model), "
                             "or neither")
        return self


@dataclass
class Iteration:
    """One recorded execution of a model (JOB: a step-trace iteration; PROF: a model execution)."""

    model_id: int
    model_name: str
    index_id: int
    batch_num: int = 1
    input_pic_num: Optional[int] = None
    start_syscnt: Optional[int] = None
    end_syscnt: Optional[int] = None


@dataclass
class Database:
    """One SQLite database of a unit: built from the raw and metadata files of ``source_dir`` by ``build``
    (called with the path to build) into ``path``, and fresh while those files are unchanged."""

    layout: str
    role: str                       # "main", or "host" for a PROF host database a device report ATTACHes
    source_dir: Path
    path: Path
    build: Callable[..., Path]            # build(target, spare_cores): picklable (a worker may build it)
    empty_ok: bool = False                # built even when its data/ holds no raw file

    def sources(self) -> List[Path]:
        return data_files(self.source_dir, self.empty_ok) + read_result_dir(self.source_dir).metadata_files

    def stale(self) -> Optional[str]:
        return store.stale(self.path, self.source_dir, self.sources(), self.layout)


@dataclass
class Unit:
    """What commands loop over. ``path``: the result directory its raw data is in; ``out``: where its
    sqlite/, summary/, timeline/ and log/ go (``path``, or a directory under --output)."""

    layout: "Layout"
    path: Path
    out: Path
    label: str
    databases: List[Database] = field(default_factory=list)     # the unit's own database last
    # why a result directory found under the path cannot be analysed (a PROF_ directory with a host and no
    # device): every command fails this unit with it, and with several units goes on with the others
    problem: Optional[MsprofError] = None

    @property
    def database(self) -> Database:
        return self.databases[-1]

    def open(self) -> "Report":
        """The unit's report (a context manager: ``with unit.open() as report``)."""
        return self.layout.report(self)


@dataclass
class Target:
    """One set of output files — summary files in ``summary_dir``, timelines in ``timeline_dir`` — and the
    units whose reports fill them, in order. A target is one unit (its out/summary and out/timeline) unless
    it is ``merged``: then the units' summary files are appended into one file per kind, named
    ``<kind>_<merged>`` (the CANN layout of a PROF_: its devices in PROF_x/mindstudio_profiler_output/,
    ``merged`` the export's time stamp, docs/prof.md)."""

    units: List[Unit]
    summary_dir: Path
    timeline_dir: Path
    merged: Optional[str] = None

    @classmethod
    def of(cls, unit: Unit) -> "Target":
        return cls([unit], unit.out / "summary", unit.out / "timeline")


class Report:
    """Read-only view of a unit's databases; each layout's report adds its tables (the methods its
    ``SummaryFile``s, timelines and show tables name)."""

    schemas = ("main",)        # the attached databases whose bookkeeping belongs to this unit

    def __init__(self, unit: Unit):
        self.unit = unit
        self.result_dir = unit.out
        self._closers: List[Callable[[], None]] = []
        self.conn = store.open_readonly(unit.database.path)
        # No mmap of the database: it made the reading process's RSS grow with the database, and on this VM
        # page faults cost more CPU than the read() calls they save (docs/performance.md).
        self.meta = store.read_meta(self.conn)
        self.device_id = self.meta.get("device_id", "0")
        # the device as tables give it: a number where the directory says one (JSON too), else its text
        self.device_number = int(self.device_id) if str(self.device_id).isdigit() else str(self.device_id)
        self.clock = self.meta_json("clock") or {}

    # --- what every layout's report says ------------------------------------------------------------------
    @property
    def has_tasks(self) -> bool:
        """Whether the unit recorded device tasks."""
        raise NotImplementedError

    def iterations(self, selection: Selection = Selection()) -> List[Iteration]:
        """The recorded iterations a selection names (every one without a selection)."""
        raise NotImplementedError

    # --- shared ------------------------------------------------------------------------------------------
    def on_close(self, close: Callable[[], None]) -> None:
        """Call ``close`` when the report is closed (before its connection): what it started must not outlive it."""
        self._closers.append(close)

    def close(self) -> None:
        try:
            while self._closers:
                self._closers.pop()()
        finally:
            self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def meta_json(self, key: str):
        try:
            value = self.meta.get(key)
            return json.loads(value) if value is not None else None
        except ValueError:
            return None

    def meta_number(self, key: str) -> Optional[float]:
        value = self.meta_json(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def count(self, table: str) -> int:
        return self.conn.execute(f"SELECT count(*) FROM [{table}]").fetchone()[0]

    def resolve(self, selection: Selection) -> Selection:
        """``selection`` with its model named: --iteration-id alone selects the one model of the result dir;
        with several it is a usage error listing them."""
        selection.check()
        if selection.model_id is not None or selection.iteration_id is None:
            return selection
        models = sorted({i.model_id for i in self.iterations(Selection())})
        if len(models) != 1:
            raise UsageError(f"{self.unit.label}: --iteration-id {selection.iteration_id} alone needs one model, "
                             f"and {len(models)} are recorded ({', '.join(map(str, models)) or 'none'}): "
                             "name one with --model-id")
        return Selection(models[0], selection.iteration_id)

    def check(self, selection: Selection) -> List[Iteration]:
        """The selected iterations; a selection that names none is a usage error (the one check)."""
        selection = self.resolve(selection)
        iterations = self.iterations(selection)
        if not selection.everything and not iterations:
            models = sorted({i.model_id for i in self.iterations(Selection())})
            if selection.model_id not in models:
                raise UsageError(f"{self.unit.label}: no model {selection.model_id} recorded (models: "
                                 f"{', '.join(map(str, models)) or 'none'}; msprof query lists their iterations)")
            raise UsageError(f"{self.unit.label}: no recorded iteration {selection.iteration_id} of model "
                             f"{selection.model_id} (msprof query lists what is there)")
        return iterations

    def notices(self) -> List[tuple]:
        """(level, message) of every notice stored at import, the unit's databases in order."""
        return [row for schema in self.schemas for row in self.conn.execute(
            f"SELECT level, message FROM {schema}.notice ORDER BY seq")]

    def notice_table(self) -> Table:
        """The import's notices as a table (query prints it)."""
        return Table("notices", "Import notices", [Column("Level"), Column("Message")], [self.notices()], cut=False)

    def quality(self) -> Optional[str]:
        """One line on what the import lost or skipped (its warnings: lost bytes, skipped records, unpaired
        tasks), None when nothing: repeated by every command that reads the database, from what the import
        stored, until the raw data changes and the database is rebuilt."""
        warnings = [message for level, message in self.notices() if level == "warning"]
        if not warnings:
            return None
        more = f" (and {len(warnings) - 1} more: msprof query lists them)" if len(warnings) > 1 else ""
        return f"{warnings[0]}{more}"


class SummaryFile(NamedTuple):
    """One summary file (or several, ``also``, filled by one pass over the same rows): the report method that
    makes its table, called as ``table(report, *args)``, with ``part=(k, n)`` when it is cut into ``parts``
    row ranges and ``gathered=`` when it is made ``after`` another file's pass."""

    name: str            # file name without extension
    table: Callable[..., Union[Table, List[Table]]]     # (with ``also``: a list of tables, one per name)
    args: tuple = ()
    weight: int = 1      # about its rows
    parts: int = 1       # row ranges its table can be cut into (the method takes part=(k, n))
    also: Tuple[str, ...] = ()     # more files the same pass over the rows fills
    after: str = ""      # the file (listed before it) whose pass gathers its input (the method takes ``gathered``)

    @property
    def names(self) -> Tuple[str, ...]:
        return (self.name,) + self.also

    def tables(self, report, **options) -> List[Table]:
        """The tables of its files, made from ``report``."""
        made = self.table(report, *self.args, **options)
        return made if self.also else [made]


class EventSource:
    """Events of one kind for a timeline, from rows in start order: ``batches()`` yields row lists,
    ``start(row)`` is a row's start (ns, the merge key), and ``write`` formats them. The trace writer
    (msprof.trace) does the rest: it merges the sources in time, cuts the files, names their threads, checks
    and renames them.

    A source of a timeline that can be split (``Timeline.split``) also takes ``window`` = (0 or 1, split):
    its rows before (0) or from (1) the split point.

    ``backwards`` counts the rows left out for ending before they start; ``noun`` and ``owner`` name the
    slices and what they sit on in the warnings (``overlap_level``: how loud an overlap is, a warning where
    the data are corrupt)."""

    noun, owner = "event", "thread"
    overlap_level = logging.WARNING
    backwards = 0

    def batches(self, window=None) -> Iterator[list]:
        raise NotImplementedError

    def start(self, row) -> int:
        raise NotImplementedError

    def write(self, rows: list, out, lanes) -> Optional[list]:
        """Format the events of ``rows`` into the file being written, ``out`` (msprof.trace.Writer: its
        ``room`` in events, its ``slice_index``, the ``threads`` it names; ``add`` the events' text, ``use`` a
        thread first seen), each on the lane ``lanes.place`` gives it, while the file has room for all of a
        row's events (a flow with its ends); return the rows not taken (None: every one), which the writer
        hands back for a new file. A row is taken whole or not at all."""
        raise NotImplementedError

    def finish(self, base: str, lanes) -> None:
        """After the last row: warnings about what was left out or moved to overlap lanes (``base``: the
        timeline's name)."""
        if self.backwards:
            log.warning("%s: %d %s(s) end before they start (corrupt data): left out of the timeline",
                        base, self.backwards, self.noun)
        if lanes.moved:
            log.log(self.overlap_level, "%s: %d %s(s) partially overlap another of their %s: shown on "
                    "'(overlap)' threads", base, lanes.moved, self.noun, self.owner)


@dataclass
class Timeline:
    """One timeline (its files share ``base``): otherData and a factory of its sources (given the report;
    the first source drives the merge; picklable: a child process may make them). ``events``: about how
    many events it holds. ``split``: when the timeline can be written in two halves by two processes, gives
    the split point (of the sources' own choosing: a value each source's window understands) for a report,
    or None."""

    base: str
    other: dict
    sources: Callable[[Report], List[EventSource]]
    events: int = 0
    split: Optional[Callable[[Report], Any]] = None
    whole: bool = False      # one file whatever its size (a file another tool reads by its name: trace_view.json)


class Layout(abc.ABC):
    """An input layout: everything the pipeline asks of one (see the module docstring)."""

    name = ""
    # whether compare and advise read its units (``facts``): a layout whose facts are not written yet says so,
    # and those commands pass its units over
    has_facts = True
    # whether advise reads its units' facts though compare does not (a framework unit: advise and compare
    # read its framework ops from its facts, ``framework_ops``; its PROF_ devices have the other facts)
    has_findings = False

    # --- finding the data ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def claims(self, result_dir: Path) -> bool:
        """Whether a result directory (a directory holding info.json*) is of this layout, by its content."""

    def missing(self, path: Path) -> Optional[str]:
        """When ``path`` holds no result directory but looks like this layout's data, what it lacks (said
        instead of "no info.json*"); None otherwise."""
        return None

    @abc.abstractmethod
    def units(self, result_dirs: List[Path], output: Optional[Path]) -> List[Unit]:
        """The units of the result directories this layout claimed (``output``: --output, where their
        databases and results go instead of beside the data)."""

    def targets(self, units: List[Unit], stamp: Optional[str] = None) -> List[Target]:
        """The output sets of these units (all of this layout): one per unit unless a layout says otherwise.
        ``stamp``: the export's time stamp when the CANN layout was asked for (a layout without one ignores it)."""
        return [Target.of(unit) for unit in units]

    @abc.abstractmethod
    def report(self, unit: Unit) -> Report:
        """The unit's report (its databases open, read-only)."""

    # --- what the commands write and print, from a unit's report -------------------------------------------
    @abc.abstractmethod
    def summary_files(self, report: Report, selection: Selection) -> List[SummaryFile]:
        """What export summary writes (saying what it skips and why)."""

    @abc.abstractmethod
    def timelines(self, report: Report, selection: Selection, cann: bool = False, host: bool = True
                  ) -> List[Timeline]:
        """What export timeline writes (saying what it skips and why). A layout whose targets are ``merged``
        (the CANN layout) is asked for its ``cann`` timelines, ``host``: with the host's events (its first
        unit of a target only); no other layout is."""

    @abc.abstractmethod
    def show_tables(self, report: Report, selection: Selection, spread: bool = False) -> List[Table]:
        """What show prints; ``spread``: its statistics with the median and std dev of their durations
        (msprof.spread: a second pass over the tasks)."""

    @abc.abstractmethod
    def query_tables(self, report: Report) -> List[Table]:
        """What query prints (the import's notices follow them)."""

    @abc.abstractmethod
    def facts(self, report: Report, idle: bool = False) -> "Facts":
        """What compare and advise read (msprof.analysis.facts; ``idle``: advise will ask for the idle facts)."""
