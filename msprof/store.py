"""The SQLite database of one result directory: build atomically, record sources, check freshness.

``import`` always rebuilds into a temporary file that is renamed to ``sqlite/msprof.db`` only when
complete, so an interrupted or failed import never destroys the previous database. Later commands
call ``stale``, which reuses the database while the recorded source files are unchanged — and only a
database msprof built on this machine for this user: the build signs its meta with the user's key and the
file's identity (msprof.trust), and a database without that signature (shipped in a collection, copied,
another user's) is rebuilt from the raw data, never read beyond its meta table. Every connection's
statements end at Ctrl-C, TERM or HUP (msprof.interrupts).
"""
import contextlib
import functools
import itertools
import json
import os
import re
import sqlite3
import stat
import sys
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Union

from msprof import SCHEMA_VERSION, __version__, interrupts, trust
from msprof.errors import DataError
from msprof.interrupts import connect, watched
from msprof.outputs import atomic_path, naming_errors, output_dir
from msprof.console import log, notice
from msprof.decode.slices import digest_file
from msprof.paths import as_text, one_line

if TYPE_CHECKING:        # pragma: no cover - imported when a database is built (sqlite_utils_database)
    import sqlite_utils

DB_NAME = "msprof.db"


def sqlite_utils_database(conn: sqlite3.Connection):
    """A sqlite_utils.Database on ``conn``. sqlite-utils is imported only by the commands that build a
    database, and without numpy and pandas: it imports them when they are installed, only to convert their
    values (msprof inserts none), which cost 100 ms and an idle BLAS thread pool per command."""
    blocked = [name for name in ("numpy", "pandas") if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None          # import fails at once: sqlite-utils goes without it
    try:
        import sqlite_utils
    finally:
        for name in blocked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]     # the process may still import the real one later
    return sqlite_utils.Database(conn)


# What the checks of a database not yet believed may cost: this many times interrupts.STEPS (SQLite's steps)
CHECK_BUDGET = 200


def db_path(result_dir: Path) -> Path:
    return Path(result_dir) / "sqlite" / DB_NAME


def tune_for_bulk_load(conn: sqlite3.Connection) -> None:
    # The file is a temporary that is thrown away on any failure, so durability is not needed here.
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    # A modest cache: a larger one only costs page faults here (records are appended, indexes built at the end).
    conn.execute("PRAGMA cache_size=-16384")
    # Index builds sort in temporary files beyond the cache (SQLite's default), not in memory: in memory the
    # sort holds every key, so the peak would grow with the tasks, and on files it is no slower.
    conn.execute("PRAGMA temp_store=FILE")


def begin(conn: sqlite3.Connection) -> None:
    """Open a transaction on the connection, unless one is (``commit``'s other half)."""
    if not conn.in_transaction:
        conn.execute("BEGIN")


def commit(conn: sqlite3.Connection) -> None:
    """End the connection's transaction, if one is open: some sqlite3/sqlite-utils versions have committed on
    their own (an import on Python 3.9 has, before its task_track association)."""
    if conn.in_transaction:
        conn.execute("COMMIT")


def write_meta(db: "sqlite_utils.Database", values: Dict[str, object]) -> None:
    rows = [{"key": k, "value": v if isinstance(v, str) else json.dumps(v)} for k, v in values.items()]
    db["meta"].upsert_all(rows, pk="key")


def read_meta(conn: sqlite3.Connection) -> Dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta"))


def base_meta() -> Dict[str, object]:
    return {"tool_version": __version__, "schema_version": str(SCHEMA_VERSION)}


def uri(path: Path, mode: str) -> str:
    """The SQLite URI that opens ``path`` in ``mode`` ("ro", "rw", "rwc"): its bytes percent-encoded, since "#",
    "?" and "%" are URI syntax and a directory named "runs #2" is an ordinary name, and a name need not be
    UTF-8 (POSIX names are bytes: "JOB\\xff" is one)."""
    return f"file:{urllib.parse.quote(os.fsencode(path))}?mode={mode}"


def readonly_uri(path: Path) -> str:
    return uri(path, "ro")


def open_readonly(path: Path) -> sqlite3.Connection:
    """The database at ``path``, read-only, with its parts attached (``SideLoads``): their tables are read
    by their names as if they were the database's own."""
    conn = connect(readonly_uri(path), uri=True)
    conn.row_factory = None
    try:
        problem = attach_parts(conn, path)
    except sqlite3.Error as exc:
        problem = str(exc)
    if problem:
        conn.close()
        raise DataError(f"{path}: {problem} (msprof import -dir … rebuilds it)")
    return conn


def part_path(path: Path, name: str, token: str) -> Path:
    """Where the part ``name`` of the database at ``path`` lives: beside it, named by its token too
    (msprof.pmu.3f2a….db), so that a new import's parts never replace the parts an older database still
    reads until the new database has replaced it."""
    path = Path(path)
    return path.with_name(f"{path.stem}.{name}.{token}{path.suffix}")


def _parts(conn: sqlite3.Connection) -> Dict[str, str]:
    """The parts a database's meta names: name → token."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'parts'").fetchone() if _has_meta(conn) else None
    return json.loads(row[0]) if row and row[0] else {}


def _remove_other_parts(path: Path, parts: Dict[str, str]) -> None:
    """Remove the part files beside the database at ``path`` it does not read (an earlier import's)."""
    keep = {part_path(path, name, token).name for name, token in parts.items()}
    pattern = re.compile(rf"^{re.escape(path.stem)}\.[a-z_]+(\.[0-9a-f]+)?{re.escape(path.suffix)}$")
    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    for name in names:
        if pattern.match(name) and name not in keep:
            with contextlib.suppress(OSError):
                os.unlink(path.parent / name)       # (a link is removed, never followed)


def attach_parts(conn: sqlite3.Connection, path: Path) -> Optional[str]:
    """ATTACH the parts the database's meta names, each checked to be the one built with it (its token);
    what is wrong, or None."""
    for name, token in sorted(_parts(conn).items()):
        part = part_path(path, name, token)
        if not part.is_file():
            return f"its part {part.name} is missing"
        conn.execute("ATTACH DATABASE ? AS ?", (readonly_uri(part), f"part_{name}"))
        found = conn.execute(f"SELECT token FROM [part_{name}].part_token").fetchone()
        if not found or found[0] != token:
            return f"its part {part.name} is from another import"
    return None


def _has_meta(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is not None


def source_snapshot(result_dir: Path, files) -> Dict[str, tuple]:
    snapshot = {}
    for path in files:
        stat = os.stat(path)
        snapshot[as_text(os.path.relpath(path, result_dir))] = (stat.st_size, stat.st_mtime_ns, path)
    return snapshot


# ---------------------------------------------------------------------------------------------------------
# The store of every layout: tables as data, atomic build, bookkeeping, freshness
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableDef:
    """One table of a store: column name → Python type (insert order), primary key, column defaults."""

    columns: Dict[str, type]
    pk: Optional[str] = None
    defaults: Dict[str, object] = field(default_factory=dict)


@dataclass
class Schema:
    """The tables and indexes of one kind of database (a layout's). Indexes are created after the bulk
    load (cheaper than maintaining them row by row); an index is (table, columns) or (table, columns,
    WHERE clause of a partial index)."""

    name: str
    tables: Dict[str, TableDef]
    indexes: List[tuple] = field(default_factory=list)

    def create(self, db: "sqlite_utils.Database", names=None) -> None:
        for name, table in self.tables.items():
            if names is None or name in names:
                db[name].create(table.columns, pk=table.pk, not_null={table.pk} if table.pk else None,
                                defaults=table.defaults or None)

    def create_indexes(self, db: "sqlite_utils.Database", names=None) -> None:
        """The indexes of these tables (all), of those in this database (a part has its own)."""
        present = {name for (name,) in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table, columns, *where in self.indexes:
            if (names is not None and table not in names) or table not in present:
                continue
            if where:
                condition = "".join(ch if ch.isalnum() else "_" for ch in where[0])
                index = f"idx_{table}_{'_'.join(columns)}_where_{condition}"
                db.execute(f"CREATE INDEX IF NOT EXISTS [{index}] ON [{table}] ({', '.join(columns)}) WHERE {where[0]}")
            else:
                db[table].create_index(columns, if_not_exists=True)


BOOKKEEPING: Dict[str, TableDef] = {
    "meta": TableDef({"key": str, "value": str}, "key"),
    "source_file": TableDef({"path": str, "kind": str, "size": int, "mtime_ns": int, "sha256": str}, "path"),
    "decode_count": TableDef({"stream": str, "kind": str, "files": int, "bytes": int, "records": int,
                           "skipped": int, "head_lost": int, "tail_lost": int}, "stream"),
    "notice": TableDef({"seq": int, "level": str, "message": str}, "seq"),
}


@contextlib.contextmanager
def build(path: Path, schema: Schema):
    """Yield a sqlite_utils.Database on a temporary file beside ``path``; it replaces ``path`` only when the
    block succeeds (an interrupted or failed import never destroys the previous database). The directory
    is created first: worker processes started inside the block write part databases into it."""
    path = Path(path)
    output_dir(path.parent)
    with atomic_path(path) as tmp, naming_errors(path):
        # (a URI: the parts it ATTACHes are named by URIs too, whatever bytes their names hold)
        conn = connect(uri(tmp, "rwc"), uri=True, isolation_level=None)
        try:
            tune_for_bulk_load(conn)
            db = sqlite_utils_database(conn)
            conn.execute("BEGIN")
            schema.create(db)
            yield db
            parts = _parts(conn)
            build_id = os.urandom(16).hex()
            signature = trust.sign(*_signed(path, build_id, os.lstat(tmp), parts))
            write_meta(db, {"build_id": build_id, "signature": signature})
            commit(conn)
            conn.execute("PRAGMA journal_mode=DELETE")
        finally:
            conn.close()
    _remove_other_parts(path, parts)        # the new database is in place: the old one's parts can go


class Notices:
    """Warnings met while importing: logged once each and kept in the database's notice table. A worker
    process collects them silently (echo=False); the parent replays them."""

    def __init__(self, echo: bool = True):
        self.items: List[tuple] = []
        self.echo = echo

    def warn(self, message: str) -> None:
        if self.echo:
            log.warning(message)
        self.items.append(("warning", message))

    def notice(self, message: str) -> None:
        if self.echo:
            notice(message)
        self.items.append(("notice", message))

    def replay(self, items) -> None:
        for level, message in items:
            (self.warn if level == "warning" else self.notice)(message)


def record_sources(db: "sqlite_utils.Database", source_dir: Path, counts, notices: Notices, files,
                   meta: Dict[str, object]) -> None:
    """The bookkeeping of a built database: every source file (size, mtime and hash: what freshness checks
    compare), the decode counts per stream, the notices, and ``meta`` (plus version and completeness)."""
    digests = {}
    for count in counts.values():
        for digest in count.digests:
            digests[digest.path] = (digest, count.kind)
        db["decode_count"].insert({"stream": count.stream, "kind": count.kind, "files": count.files,
                                   "bytes": count.bytes, "records": count.records, "skipped": count.skipped,
                                   "head_lost": count.head_lost, "tail_lost": count.tail_lost})
    for path in files:
        if path not in digests:
            digests[path] = (digest_file(path), "data" if path.parent.name == "data" else "metadata")
    db["source_file"].insert_all([{"path": as_text(os.path.relpath(d.path, source_dir)), "kind": kind, "size": d.size,
                                   "mtime_ns": d.mtime_ns, "sha256": d.sha256} for d, kind in digests.values()],
                                 replace=True)
    db["notice"].insert_all([{"level": level, "message": one_line(message)} for level, message in notices.items])
    values = base_meta()
    values.update(meta)
    values["bytes_lost"] = sum(c.head_lost + c.tail_lost for c in counts.values())
    values["complete"] = "1"
    write_meta(db, values)


def _signed(path: Path, build_id: str, info: os.stat_result, parts: Dict[str, str]) -> tuple:
    """What a database's signature signs: its build's id, its file's identity (``info``: its file's, at
    ``path``) and its parts' (msprof.trust)."""
    return ("msprof database", build_id, trust.identity(info), *(
        f"{name}:{token}:{trust.identity(os.lstat(part_path(path, name, token)))}"
        for name, token in sorted(parts.items())))


NOT_BELIEVED = "database not made by msprof here for this user, or changed since: not believed"


def _believed(conn: sqlite3.Connection, path: Path, info: os.stat_result) -> Union[Dict[str, str], str]:
    """The meta of the database open on ``conn`` if msprof built it here for this user (its signature holds for
    this very file and its parts), else why not. Nothing but its meta table is read, and that within a budget
    of SQLite's steps (a built-in counts them: no Python runs inside SQLite): its views and its other tables
    are the sender's until the signature holds."""
    conn.set_progress_handler(functools.partial(next, itertools.repeat(0, CHECK_BUDGET), 1), interrupts.STEPS)
    try:
        if conn.execute("SELECT type FROM sqlite_master WHERE name = 'meta'").fetchall() != [("table",)]:
            return NOT_BELIEVED
        meta = read_meta(conn)
        parts = json.loads(meta.get("parts") or "{}")
        signed = _signed(path, meta.get("build_id"), info, parts)
    except FileNotFoundError as exc:
        return f"{path}: its part {Path(exc.filename).name} is missing"
    except (sqlite3.Error, ValueError, TypeError, AttributeError, OSError):
        return NOT_BELIEVED
    finally:
        conn.set_progress_handler(None, 0)
        watched(conn)
    return meta if trust.signed(meta.get("signature"), *signed) else NOT_BELIEVED


def stale(path: Path, source_dir: Path, files, layout: str) -> Optional[str]:
    """None while the database at ``path`` was built by this msprof, here, for this user (``_believed``), for
    ``layout`` from exactly ``files`` (compared by size, and by content hash where only the mtime changed),
    else why it must be rebuilt."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "no database yet"
    except OSError as exc:    # a directory this user may not enter: the build that follows names it
        return f"database not readable ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "no database yet" if stat.S_ISDIR(info.st_mode) else "its database is not a regular file"
    try:
        with contextlib.closing(connect(readonly_uri(path), uri=True)) as conn:
            meta = _believed(conn, path, info)
            if isinstance(meta, str):
                return meta
            if meta.get("schema_version") != str(SCHEMA_VERSION) or meta.get("complete") != "1":
                return "database from another msprof version"
            if meta.get("layout") != layout:
                return f"database not built for the {layout} layout"
            problem = attach_parts(conn, path)
            if problem:
                return f"{path}: {problem}"
            recorded = {row[0]: row[1:] for row in conn.execute("SELECT path, size, mtime_ns, sha256 FROM source_file")}
    except sqlite3.Error as exc:
        return f"database unreadable ({exc})"
    current = source_snapshot(source_dir, files)
    if set(recorded) != set(current):
        return "raw files added or removed"
    for rel, (size, mtime_ns, source) in current.items():
        old_size, old_mtime, old_hash = recorded[rel]
        if size != old_size:
            return f"{rel} changed"
        if mtime_ns != old_mtime:
            try:
                if digest_file(Path(source)).sha256 != old_hash:
                    return f"{rel} changed"
            except OSError:         # (the import that follows says why it cannot read it)
                return f"{rel} unreadable"
    return None
