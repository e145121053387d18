"""Checks on path arguments and finding the newest collection in a directory."""
import re
from pathlib import Path

from msprof.errors import NoCollectionError, UsageError

# The SS928 tool refuses these in path arguments; so do we (cli.md).
_FORBIDDEN = {'"': "double quote", "'": "single quote", "%": "percent sign", ">": "'>'", "<": "'<'",
              "|": "'|'", "&": "'&'", "$": "'$'", ";": "';'", "`": "backquote"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_path_argument(value: str, option: str = "path") -> Path:
    """Return ``value`` as a Path, or raise UsageError naming the offending character."""
    match = _CONTROL.search(value)
    if match:
        raise UsageError(f"{option} contains a control character (0x{ord(match.group()):02x}): refused")
    for char, name in _FORBIDDEN.items():
        if char in value:
            raise UsageError(f"{option} contains a forbidden character {name}: {value!r}")
    return Path(value)


def newest_collection(parent: Path) -> Path:
    """The most recently modified JOB*/PROF_* directory directly under ``parent``."""
    candidates = [p for p in Path(parent).iterdir()
                  if p.is_dir() and not p.is_symlink() and (p.name.startswith("JOB") or p.name.startswith("PROF_"))]
    if not candidates:
        raise NoCollectionError(
            f"no JOB* or PROF_* directory under {parent}; pass one with -dir (e.g. msprof import -dir JOBxxx)")
    return max(candidates, key=lambda p: (p.stat().st_mtime_ns, p.name))


_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


def safe_name(part) -> str:
    """A file-name component: 'N_A' for missing values, anything odd replaced by '_'."""
    if part is None or part == "":
        return "N_A"
    if isinstance(part, float) and part.is_integer():
        part = int(part)
    return _UNSAFE.sub("_", str(part))
