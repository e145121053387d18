"""Checks on path arguments and finding the newest collection in a directory."""
import os
import re
from pathlib import Path

from msprof.errors import NoCollectionError, UsageError

# The SS928 tool refuses these in path arguments; collect does too, for what goes into a command on the board
# (cli.md). The analysis commands' paths never reach a shell, and the hints that print them quote them.
_FORBIDDEN = {'"': "double quote", "'": "single quote", "%": "percent sign", ">": "'>'", "<": "'<'",
              "|": "'|'", "&": "'&'", "$": "'$'", ";": "';'", "`": "backquote"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_local_path(value: str, option: str = "path") -> Path:
    """``value`` as a Path; a control character (which no printed line or pasted hint can carry) is a
    UsageError. Any other character is a name's own."""
    match = _CONTROL.search(value)
    if match:
        raise UsageError(f"{option} contains a control character (0x{ord(match.group()):02x}): refused")
    return Path(value)


def check_path_argument(value: str, option: str = "path") -> Path:
    """``value`` as a Path for collect, whose paths reach the board's commands: a control character or any of
    _FORBIDDEN is a UsageError naming it."""
    check_local_path(value, option)
    for char, name in _FORBIDDEN.items():
        if char in value:
            raise UsageError(f"{option} contains a forbidden character {name}: {value!r}")
    return Path(value)


def is_collection(directory: Path) -> bool:
    """A JOB or PROF_ result directory, or a PROF_ directory, itself (by content: its info.json*, or the
    host/ and device_N/ directories holding theirs)."""
    try:
        if any(p.name.startswith("info.json") and p.is_file() for p in Path(directory).iterdir()):
            return True
        return any(p.is_dir() and not p.is_symlink() and (p.name == "host" or re.fullmatch(r"device_\d+", p.name))
                   and any(q.name.startswith("info.json") for q in p.iterdir()) for p in Path(directory).iterdir())
    except OSError:
        return False


def _collected_at(collection: Path) -> int:
    """When a collection's raw data were last written: its data/ directories' time (JOB/data, PROF_*/*/data).
    Not the collection directory's own: msprof's outputs (sqlite/, summary/) change that."""
    stamps = []
    for data in (collection / "data", *collection.glob("*/data")):
        try:
            stamps.append(data.stat().st_mtime_ns)
        except OSError:
            pass
    return max(stamps) if stamps else collection.stat().st_mtime_ns


def newest_collection(parent: Path) -> Path:
    """The most recently collected JOB*/PROF_* directory directly under ``parent``."""
    candidates = [p for p in Path(parent).iterdir()
                  if p.is_dir() and not p.is_symlink() and (p.name.startswith("JOB") or p.name.startswith("PROF_"))]
    if not candidates:
        raise NoCollectionError(
            f"no JOB* or PROF_* directory under {parent}; pass one with -dir (e.g. msprof import -dir JOBxxx)")
    return max(candidates, key=lambda p: (_collected_at(p), p.name))


_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


def safe_name(part) -> str:
    """A file-name component: 'N_A' for missing values, anything odd replaced by '_'."""
    if part is None or part == "":
        return "N_A"
    if isinstance(part, float) and part.is_integer():
        part = int(part)
    return _UNSAFE.sub("_", str(part))


def printable(name) -> str:
    """``name`` (str or bytes) safe to print on one line: bytes that are not UTF-8 become ``\\xff``, control
    and other unprintable characters Python-style escapes (``\\n``, ``\\x1b``, ``\\u202e``), ``\\`` is doubled."""
    text = name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else str(name)
    out = []
    for char in text:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif char == "\\":
            out.append("\\\\")
        elif char.isprintable():
            out.append(char)
        else:
            out.append(repr(char)[1:-1])
    return "".join(out)


def as_text(path) -> str:
    """A path (POSIX: bytes) as text that SQLite and JSON take whatever its bytes: its undecodable bytes as
    ``\\xff`` and its backslashes doubled (two paths never give one text); a UTF-8 path without a backslash, the
    usual one, as it is. (``printable``, which also escapes what a terminal would act on, is for printing.)"""
    text = str(path)
    if "\\" not in text:
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            pass
    return os.fsencode(text).replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")


def one_line(text: str) -> str:
    """``text`` with control and other unprintable characters escaped (``\\n``, ``\\x1b``) and undecodable
    bytes as ``\\xff`` — backslashes as they are, so that text already escaped with ``printable`` stays as
    it is. Every line msprof logs or prints goes through it: a name from the data cannot add a line."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif char.isprintable():
            out.append(char)
        else:
            out.append(repr(char)[1:-1])
    return "".join(out)


def inside(path: Path, root: Path) -> bool:
    """Does ``path``, with every symlink resolved, lie in ``root`` (a resolved directory)? A path that cannot be
    resolved (a symlink loop, a directory the user may not look into) does not."""
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):  # (RuntimeError: a symlink loop, before Python 3.13)
        return False
    return resolved == root or root in resolved.parents
