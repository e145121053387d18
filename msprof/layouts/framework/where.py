"""Where a torch_npu or MindSpore result directory (``*_ascend_pt``, ``*_ascend_ms``: framework.md §1) is, by
its content, never by its name: a directory holding a ``FRAMEWORK/`` with a file of a known family
(msprof.decode.framework.FAMILIES), or a ``profiler_info.json`` / ``profiler_info_<rank>.json``."""
import os
import re
from pathlib import Path
from typing import List, Optional

from msprof.decode.framework import FAMILIES

FRAMEWORK_DIR = "FRAMEWORK"
RESULTS_DIR = "ASCEND_PROFILER_OUTPUT"
INFO = re.compile(r"^profiler_info(?:_(\d+))?\.json$")
# the PROF_ directory of a framework directory, as torch_npu finds it (target §1)
PROF_NAME = re.compile(r"^PROF_\d+_\d+_[0-9a-zA-Z]+")


def _names(directory: Path) -> List[str]:
    try:
        return sorted(p.name for p in Path(directory).iterdir())
    except OSError:
        return []


def info_files(directory: Path) -> List[Path]:
    """The profiler_info*.json files of a directory (regular files, no links), in name order."""
    return [Path(directory) / n for n in _names(directory) if INFO.match(n)
            and os.path.isfile(Path(directory) / n) and not os.path.islink(Path(directory) / n)]


def family_files(directory: Path) -> List[str]:
    """The names in ``directory``/FRAMEWORK that a FRAMEWORK family claims."""
    return [n for n in _names(Path(directory) / FRAMEWORK_DIR) if any(p.match(n) for p, _k, _m in FAMILIES)]


def is_framework_dir(directory: Path) -> bool:
    directory = Path(directory)
    if os.path.islink(directory) or not directory.is_dir():
        return False
    return bool(info_files(directory)) or bool(family_files(directory))


def framework_root(prof_root: Optional[Path]) -> Optional[Path]:
    """The framework directory a PROF_ directory belongs to (its parent, when that is one), else None."""
    if prof_root is None or not PROF_NAME.match(prof_root.name):
        return None
    return prof_root.parent if is_framework_dir(prof_root.parent) else None


def prof_dirs(directory: Path) -> List[Path]:
    """The PROF_ directories of a framework directory, in name order."""
    return [Path(directory) / n for n in _names(directory) if PROF_NAME.match(n)
            and os.path.isdir(Path(directory) / n) and not os.path.islink(Path(directory) / n)]


def without_raw_data(path: Path) -> Optional[str]:
    """What a directory holding no result directory lacks when it looks like a framework directory (its results
    alone, or FRAMEWORK/ without a PROF_): None when it does not look like one."""
    path = Path(path)
    results = (path / RESULTS_DIR).is_dir()
    if not results and not is_framework_dir(path):
        return None
    missing = [what for what, there in ((f"{FRAMEWORK_DIR}/", bool(family_files(path))),
                                        ("a PROF_* directory with its host/ and device_N/", bool(prof_dirs(path))))
               if not there]
    if not missing:         # (a PROF_ without its metadata: the PROF layout's own error says it)
        return None
    held = f"only {RESULTS_DIR}/ (results without their raw data)" if results and missing[:1] == [
        f"{FRAMEWORK_DIR}/"] else "framework data without the CANN data msprof analyses"
    return (f"{path}: a torch_npu/MindSpore result directory holding {held}: {' and '.join(missing)} missing "
            "(msprof reads the raw data: point it at the directory the profiler wrote, before its analysis "
            "deleted anything)")
