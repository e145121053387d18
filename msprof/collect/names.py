"""Names that come from outside (the board, the project tree): which ones to accept.

Names coming from the board are validated before they touch the local disk: no ``/`` or ``\\``, no ``.`` or
``..``, no control characters, valid UTF-8, at most 255 bytes; a JOB directory name also only
``[A-Za-z0-9_.-]``.
"""
import re
from typing import List

from msprof.errors import RemoteError
from msprof.paths import printable

# What a JOB directory name may be made of: it ends up in paths we print, in shell hints and in the names of
# result files, so nothing a shell or a terminal would interpret.
JOB_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def is_job_name(name: str) -> bool:
    return JOB_NAME.fullmatch(name) is not None and name not in (".", "..") and len(name) <= 255


class Unpullable(RemoteError):
    """This JOB directory cannot be pulled safely or completely (a name, a listing); the others can."""


def check_name(name: str, where: str = "") -> str:
    """Refuse a remote file name that could escape or confuse the local tree."""
    bad = None
    if not name or name in (".", ".."):
        bad = "empty, '.' or '..'"
    elif "/" in name or "\\" in name:
        bad = "a path separator"
    elif _CONTROL.search(name):
        bad = "a control character"
    elif any(0xDC80 <= ord(c) <= 0xDCFF for c in name):
        bad = "bytes that are not UTF-8"
    elif len(name.encode("utf-8", "surrogateescape")) > 255:
        bad = "more than 255 bytes"
    if bad:
        raise Unpullable(f"the board sent an unsafe file name '{printable(name)}'"
                         f"{' in ' + printable(where) if where else ''} ({bad}); refused")
    return name


def check_job_name(name: str) -> str:
    if not is_job_name(name):
        raise Unpullable(f"the board wrote a JOB directory named '{printable(name)}': only letters, digits and "
                         "_ . - are accepted in a JOB name; not pulled")
    return name


def check_relpath(path: str) -> List[str]:
    """Split a relative posix path from the board into validated components."""
    text = path
    while text.startswith("./"):
        text = text[2:]
    text = text.rstrip("/")
    if not text or text.startswith("/"):
        raise Unpullable(f"the board sent an unsafe path '{printable(path)}' (absolute or empty); refused")
    parts = text.split("/")
    for part in parts:
        check_name(part, path)
    return parts
