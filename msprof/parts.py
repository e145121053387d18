"""Large record families loaded by a worker process into *part* databases beside the database being built
(``SideLoads``), while the main process loads the rest; readers attach the parts (msprof.store.attach_parts)."""
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional

from msprof.interrupts import connect
from msprof.outputs import naming_errors, output_dir, temporary
from msprof.store import (Notices, Schema, begin, commit, part_path, readonly_uri, sqlite_utils_database,
                          tune_for_bulk_load, uri, write_meta)

if TYPE_CHECKING:        # pragma: no cover
    import sqlite_utils

# Families at least this large are loaded by a worker process (into a part database of their own) while the
# main process loads the others; below it a process costs more than it saves.
PARALLEL_MIN_BYTES = 16 << 20


def open_part(path: Path, schema: Schema, tables: List[str], source: Optional[Path] = None,
              cache_kb: Optional[int] = None, source_parts: Optional[Dict[str, Path]] = None) -> sqlite3.Connection:
    """A part database a worker fills beside the database being built: bulk-load settings (``cache_kb``: a
    cache of its own size), ``tables`` of ``schema`` created, a transaction open. ``source``: the database
    being built, attached read-only as ``source`` for lookups (before the transaction: SQLite attaches
    outside one), with its parts merged so far (``SideLoads.attached``) under their names."""
    # (a URI, so that the read-only URI it attaches is one too whatever SQLite's build defaults)
    conn = connect(uri(path, "rwc"), uri=True, isolation_level=None)
    tune_for_bulk_load(conn)
    if cache_kb is not None:
        conn.execute(f"PRAGMA cache_size=-{int(cache_kb)}")
    if source is not None:
        conn.execute("ATTACH DATABASE ? AS source", (readonly_uri(source),))
        for name, part in sorted((source_parts or {}).items()):
            conn.execute("ATTACH DATABASE ? AS ?", (readonly_uri(part), name))
    schema.create(sqlite_utils_database(conn), tables)
    begin(conn)
    return conn


def _side_worker(part: str, schema: Schema, table: str, load, streams, token: str):
    """In a worker process: one family into a part database (its table, then its indexes, and the token
    that ties it to the database built with it); returns (counts, notices)."""
    conn = open_part(Path(part), schema, [table])
    try:
        db = sqlite_utils_database(conn)
        counts: dict = {}
        notices = Notices(echo=False)
        result = load(conn, streams, counts, notices)
        schema.create_indexes(db, [table])
        conn.execute("CREATE TABLE part_token (token TEXT)")
        conn.execute("INSERT INTO part_token VALUES (?)", (token,))
        commit(conn)
        conn.execute("PRAGMA journal_mode=DELETE")
        return counts, notices.items, result
    finally:
        conn.close()


class SideLoads:
    """Loads large families in one worker process while the main process loads the rest.

    ``families``: name → (table, load(conn, streams, counts, notices), streams), in the order the worker loads
    them. Only families of at least PARALLEL_MIN_BYTES go to the worker, and only with more than one core
    (``spare_cores``). ``merge(db, name)`` waits for a family (or loads it here when it was not sent to the
    worker) and returns what its load returned. One worker, not one per family: two cores then run two
    processes. ``attached()``: the parts merged so far, for other connections that read the database while it
    is built.

    A family the worker loaded stays in its own database file, a *part* beside the database
    (msprof.pmu.<token>.db beside msprof.db), which readers attach (``open_readonly``), which costs nothing, where
    copying its table in would cost a pass over its records. The database's meta names its parts and their tokens, which each part
    holds too, so that a part from another import is never read with it. Parts are moved into place under
    new names before the database; the earlier database's parts are removed once the new database has
    replaced it (``build``), so a failed import leaves the earlier one whole."""

    def __init__(self, target: Path, schema: Schema, families: dict, spare_cores: bool):
        self.target, self.schema, self.families = Path(target), schema, families
        sizes = {name: sum(p.stat().st_size for item in f[2] for p in item.files) for name, f in families.items()}
        self.remote = [name for name in families if spare_cores and sizes[name] >= PARALLEL_MIN_BYTES]
        self.futures = {}
        self.tokens: Dict[str, str] = {}
        self.kept: Dict[str, str] = {}
        self.conn: Optional[sqlite3.Connection] = None     # the database's, with the kept parts attached
        self.executor = None
        self.parts: Dict[str, Path] = {}

    def _part(self, name: str) -> Path:
        """The worker's database for ``name``: a new temporary (a name no one could have linked elsewhere)."""
        if name not in self.parts:
            self.parts[name] = temporary(self.target.parent, f"{self.target.stem}.{name}{self.target.suffix}")
        return self.parts[name]

    def __enter__(self):
        if self.remote:
            from msprof.workers import Pool

            output_dir(self.target.parent)
            self.executor = Pool(1)
            for name in self.remote:
                part = self._part(name)
                table, load, streams = self.families[name]
                self.tokens[name] = os.urandom(8).hex()
                self.futures[name] = self.executor.submit(_side_worker, str(part), self.schema, table, load, streams,
                                                          self.tokens[name])
        return self

    def merge(self, db: "sqlite_utils.Database", name: str, counts: dict, notices: Notices):
        table, load, streams = self.families[name]
        if name in self.futures:
            side_counts, side_notices, result = self.futures.pop(name).result()
            if not self.futures:
                # the worker is done: its pool (and the pool's thread) goes now, so that a process forked later
                # in the import (the association's) is not forked from a threaded one
                self.executor.shutdown(wait=True)
                self.executor = None
            notices.replay(side_notices)
            counts.update(side_counts)
            conn = self.conn = db.conn
            conn.execute(f"DROP TABLE main.[{table}]")      # read from the part instead
            self.kept[name] = self.tokens[name]
            write_meta(db, {"parts": self.kept})
            commit(conn)     # the rest of the import may read it too (ATTACH is refused inside a transaction)
            conn.execute("ATTACH DATABASE ? AS ?", (uri(self._part(name), "rw"), f"part_{name}"))
            conn.execute("BEGIN")
            return result
        result = load(db.conn, streams, counts, notices)
        self.schema.create_indexes(db, [table])
        return result

    def attached(self) -> Dict[str, Path]:
        """The parts merged so far, by the names they are attached under."""
        return {f"part_{name}": self.parts[name] for name in self.kept}

    def __exit__(self, kind, *exc):
        if self.executor is not None:     # (after an error or an interrupt: stopped, not waited for)
            self.executor.close(failed=kind is not None)
        if self.conn is not None and kind is None:       # no part open while it moves (some systems refuse)
            commit(self.conn)
            for name in self.kept:
                self.conn.execute("DETACH DATABASE ?", (f"part_{name}",))
            self.conn.execute("BEGIN")
        for name in self.families:
            part = self.parts.get(name)
            if kind is None and name in self.kept:     # a name of its own: no earlier part is replaced
                final = part_path(self.target, name, self.kept[name])
                with naming_errors(final):
                    os.replace(part, final)
            elif part is not None:
                part.unlink(missing_ok=True)
        return False
