"""Names that come from outside (the board, the project tree): how to print them and which ones to accept."""
import re

# What a JOB directory name may be made of: it ends up in paths we print, in shell hints and in the names of
# result files, so nothing a shell or a terminal would interpret.
JOB_NAME = re.compile(r"[A-Za-z0-9_.-]+")


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


def is_job_name(name: str) -> bool:
    return JOB_NAME.fullmatch(name) is not None and name not in (".", "..") and len(name) <= 255
