"""Library entry points behind the CLI. Each takes a path (a result dir, a PROF_ dir or a parent)."""
from pathlib import Path
from typing import List, Optional


def import_collection(path: Path) -> List[Path]:
    """Rebuild the SQLite database of every result directory under ``path``; return the database paths."""
    raise NotImplementedError


def export_timeline(path: Path, model_id: Optional[int] = None, iteration_id: Optional[int] = None) -> List[Path]:
    """Write Chrome traces into <result dir>/timeline/ (importing first when needed); return the files."""
    raise NotImplementedError


def export_summary(path: Path, fmt: str = "csv", model_id: Optional[int] = None,
                   iteration_id: Optional[int] = None) -> List[Path]:
    """Write op_summary/op_statistic/acl_statistic files into <result dir>/summary/; return the files."""
    raise NotImplementedError


def analyse(path: Path) -> List[Path]:
    """import + export timeline + export summary (what ``collect --all`` runs on each pulled JOB)."""
    import_collection(path)
    return export_timeline(path) + export_summary(path)


def show(path: Path, model_id=None, iteration_id=None, top=None, fmt="table", style="simple") -> None:
    raise NotImplementedError


def query(path: Path) -> None:
    raise NotImplementedError


def demo(output: Path) -> None:
    raise NotImplementedError
