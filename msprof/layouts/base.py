"""What the layouts share beside the contract (msprof.contract): where a result directory's outputs go, and
the kind of query's iteration ids."""
from pathlib import Path
from typing import Optional

from msprof.tables import INT, NA, TEXT, Column, Kind, Table


def out_dir(path: Path, output: Optional[Path], *relative: str) -> Path:
    """Where a result directory's outputs go: itself, or OUTPUT/<name>[/<relative>] with --output."""
    if output is None:
        return Path(path)
    return Path(output).joinpath(*relative) if relative else Path(output) / Path(path).name


class _IdList(Kind):
    """A list of ids (query's iteration ids): ranges in csv and the terminal ("1-3,5"; N/A for none), a list
    of ints in JSON."""

    name = "id_list"

    def text(self, value) -> str:
        return id_ranges(value) or NA if value is not None else NA

    def json(self, value):
        return None if value is None else list(value)


def id_ranges(ids) -> Optional[str]:
    """[1,2,3,5] → '1-3,5'."""
    runs: list = []
    for i in sorted(ids):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs) or None


ID_LIST = _IdList()


def data_table(report) -> Table:
    """query's Data table of a unit with one database: records and bytes lost per kind of data."""
    return Table("data", "Data", [Column("Data", TEXT), Column("Records", INT), Column("Bytes lost", INT)],
                 [list(report.conn.execute("SELECT kind, sum(records), sum(head_lost + tail_lost) FROM decode_count"
                                           " GROUP BY kind ORDER BY kind"))])
