"""What an input layout is to the one pipeline (raw files → decoders → store → reports → renderers).

A ``Layout`` (msprof.layouts.job, msprof.layouts.prof) recognises its result directories by their content,
turns them into ``Unit``s — what every command loops over: a JOB directory; a PROF device with its host —
and provides, per unit, its ``Database``s (schema + import), and a ``Report`` that knows the unit's tables:
the summary files, the timelines and the show tables. Everything else (finding units, freshness, the
summary writer, the trace writer, show/query, the log) is shared and lives outside the layouts.
"""
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, NamedTuple, Optional

from msprof import store
from msprof.errors import MsprofError, UsageError


# query's collection table in a narrow terminal: the columns kept, most important first (the ids a selection
# takes before the rest)
COLLECTION_KEEP = ("Model Id", "Iteration Ids", "Model Name", "Iterations", "Device")


class Selection(NamedTuple):
    """--model-id / --iteration-id: both or neither (``check``)."""

    model_id: Optional[int] = None
    iteration_id: Optional[int] = None

    @property
    def everything(self) -> bool:
        return self.model_id is None and self.iteration_id is None

    def check(self) -> "Selection":
        if (self.model_id is None) != (self.iteration_id is None):
            raise UsageError("--model-id and --iteration-id go together: give both or neither")
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
        from msprof.collection import data_files, read_result_dir

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
    problem: Optional["MsprofError"] = None

    @property
    def database(self) -> Database:
        return self.databases[-1]

    def open(self) -> "Report":
        return self.layout.report(self)


class Report:
    """Read-only view of a unit's database; each layout's report adds its tables."""

    def __init__(self, unit: Unit):
        self.unit = unit
        self.result_dir = unit.out
        self._closers: List[Callable[[], None]] = []
        self.conn = store.open_readonly(unit.database.path)
        # No mmap of the database: it made the reading process's RSS grow with the database (150 MB for
        # export summary at 1M tasks, 34 MB without) and, on this VM, page faults cost more CPU than the
        # read() calls they save.
        self.meta = store.read_meta(self.conn)
        self.device_id = self.meta.get("device_id", "0")
        # the device as tables give it: a number where the directory says one (JSON too), else its text
        self.device_number = int(self.device_id) if str(self.device_id).isdigit() else str(self.device_id)
        self.clock = self.meta_json("clock") or {}

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

    def iterations(self, selection: Selection = Selection()) -> List[Iteration]:
        raise NotImplementedError

    def check(self, selection: Selection) -> List[Iteration]:
        """The selected iterations; a selection that names none is a usage error (the one check)."""
        selection.check()
        iterations = self.iterations(selection)
        if not selection.everything and not iterations:
            models = sorted({i.model_id for i in self.iterations(Selection())})
            if selection.model_id not in models:
                raise UsageError(f"{self.unit.label}: no model {selection.model_id} recorded (models: "
                                 f"{', '.join(map(str, models)) or 'none'}; msprof query lists their iterations)")
            raise UsageError(f"{self.unit.label}: no recorded iteration {selection.iteration_id} of model "
                             f"{selection.model_id} (msprof query lists what is there)")
        return iterations

    schemas = ("main",)        # the attached databases whose bookkeeping belongs to this unit

    def notices(self) -> List[tuple]:
        """(level, message) of every notice stored at import, the unit's databases in order."""
        return [row for schema in self.schemas for row in self.conn.execute(
            f"SELECT level, message FROM {schema}.notice ORDER BY seq")]

    def notice_table(self):
        """The import's notices as a table (query prints it)."""
        from msprof.tables import Column, Table

        return Table("notices", "Import notices", [Column("Level"), Column("Message")], [self.notices()],
                     keep=("Message", "Level"), cut=False)

    def quality(self) -> Optional[str]:
        """One line on what the import lost or skipped (its warnings: lost bytes, skipped records, unpaired
        tasks), None when nothing: repeated by every command that reads the database, from what the import
        stored, until the raw data changes and the database is rebuilt."""
        warnings = [message for level, message in self.notices() if level == "warning"]
        if not warnings:
            return None
        more = f" (and {len(warnings) - 1} more: msprof query lists them)" if len(warnings) > 1 else ""
        return f"{warnings[0]}{more}"


class Layout:
    """Base of the input layouts (see the module docstring)."""

    name = ""

    def claims(self, result_dir: Path) -> bool:
        """Whether a result directory (a directory holding info.json*) is of this layout, by its content."""
        raise NotImplementedError

    def units(self, result_dirs: List[Path], output: Optional[Path]) -> List[Unit]:
        raise NotImplementedError

    def report(self, unit: Unit) -> Report:
        raise NotImplementedError


def out_dir(path: Path, output: Optional[Path], *relative: str) -> Path:
    """Where a result directory's outputs go: itself, or OUTPUT/<name>[/<relative>] with --output."""
    if output is None:
        return Path(path)
    return Path(output).joinpath(*relative) if relative else Path(output) / Path(path).name


@contextlib.contextmanager
def opened(unit: Unit):
    report = unit.open()
    try:
        yield report
    finally:
        report.close()
