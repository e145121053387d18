"""known_hosts files read the way OpenSSH reads them (sshd(8), "SSH_KNOWN_HOSTS FILE FORMAT").

* A line is ``[marker] hostnames keytype base64-key [comment]``; blank lines and ``#`` lines are comments.
* ``hostnames`` is a comma-separated list of patterns (``*`` and ``?`` wildcards; ``[host]:port`` for a port
  other than 22, where ``[`` is literal). A matching ``!pattern`` excludes the line even if another pattern
  matched. A hashed name (``|1|salt|hash``) stands alone and has no wildcards. Names compare case-insensitively.
* Lines that cannot be used are skipped, as by ssh: an unknown marker, too few fields, bad base64, or a key
  whose encoded type is not the line's keytype. ``@cert-authority`` lines are skipped too (msprof does not
  do host certificates).
* Verdict for the key a host presented, over all lines that match the host, in all files:
  ``revoked`` when a matching ``@revoked`` line holds that key (this wins over everything);
  ``known`` when any matching plain line holds it (several lines for one host are fine);
  ``changed`` when matching plain lines exist but none holds it (whatever their key type: ssh prefers the
  known types when it negotiates, see :func:`preferred_key_types`, so a board that still has its old key
  never looks changed);
  ``unknown`` otherwise — the only case ``--accept-new-host-key`` may add.
"""
import base64
import binascii
import hashlib
import hmac
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

from msprof.collect.config import read_small_file
from msprof.console import log

MAX_KNOWN_HOSTS_BYTES = 64 << 20
MARKERS = ("@revoked", "@cert-authority")


@dataclass(frozen=True)
class HostLine:
    path: Path
    number: int
    marker: str  # "", "@revoked" or "@cert-authority"
    hostnames: str
    key_type: str
    blob: bytes

    @property
    def where(self) -> str:
        return f"{self.path}:{self.number}"


@dataclass
class Verdict:
    status: str  # "known", "changed", "revoked" or "unknown"
    lines: List[HostLine]  # the lines behind the verdict (the old keys for "changed")


def host_entry_name(host: str, port: int) -> str:
    """The name known_hosts uses: ``host`` on port 22, ``[host]:port`` otherwise (as OpenSSH)."""
    return host if port == 22 else f"[{host}]:{port}"


def read_lines(path: Path) -> List[HostLine]:
    """The usable lines of one known_hosts file ([] when it does not exist). OSError/FileRefused for a file
    that exists but cannot be read."""
    try:
        data = read_small_file(path, MAX_KNOWN_HOSTS_BYTES)
    except FileNotFoundError:
        return []
    lines = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        line = _parse(raw.decode("utf-8", "replace"), path, number)
        if line is not None:
            lines.append(line)
    return lines


def _parse(text: str, path: Path, number: int) -> Optional[HostLine]:
    fields = text.split()
    if not fields or fields[0].startswith("#"):
        return None
    marker = ""
    if fields[0].startswith("@"):
        marker = fields.pop(0)
        if marker not in MARKERS:
            log.info("%s:%d: unknown marker %s; line ignored", path, number, marker[:40])
            return None
    if len(fields) < 3:
        log.info("%s:%d: too few fields; line ignored", path, number)
        return None
    hostnames, key_type, text64 = fields[:3]
    try:
        blob = base64.b64decode(text64, validate=True)
    except (binascii.Error, ValueError):
        log.info("%s:%d: the key is not valid base64; line ignored", path, number)
        return None
    if _blob_type(blob) != key_type:
        log.info("%s:%d: the key is not of type %s; line ignored", path, number, key_type[:40])
        return None
    return HostLine(path, number, marker, hostnames, key_type, blob)


def _blob_type(blob: bytes) -> Optional[str]:
    """The key type an SSH public key blob starts with (a uint32 length, then the name)."""
    if len(blob) < 4:
        return None
    (size,) = struct.unpack(">I", blob[:4])
    if size > 64 or len(blob) < 4 + size:
        return None
    try:
        return blob[4:4 + size].decode("ascii")
    except UnicodeDecodeError:
        return None


def host_matches(hostnames: str, name: str) -> bool:
    """Does the hostnames field of a line name ``name`` (``host`` or ``[host]:port``)?"""
    name = name.lower()
    if hostnames.startswith("|"):
        return _hashed_matches(hostnames, name)
    matched = False
    for pattern in hostnames.lower().split(","):
        negated = pattern.startswith("!")
        if _pattern_matches(pattern[1:] if negated else pattern, name):
            if negated:
                return False
            matched = True
    return matched


def _pattern_matches(pattern: str, name: str) -> bool:
    if "*" not in pattern and "?" not in pattern:
        return pattern == name
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.DOTALL) is not None


def _hashed_matches(field: str, name: str) -> bool:
    """``|1|base64(salt)|base64(HMAC-SHA1(salt, name))``, as ssh-keygen -H writes it."""
    parts = field.split("|")
    if len(parts) != 4 or parts[0] != "" or parts[1] != "1":
        return False
    try:
        salt = base64.b64decode(parts[2], validate=True)
        digest = base64.b64decode(parts[3], validate=True)
    except (binascii.Error, ValueError):
        return False
    mine = hmac.new(salt, name.encode("utf-8"), hashlib.sha1).digest()
    return hmac.compare_digest(mine, digest)


def matching(lines: Iterable[HostLine], name: str) -> List[HostLine]:
    return [line for line in lines if host_matches(line.hostnames, name)]


def check(lines: Sequence[HostLine], name: str, key_type: str, blob: bytes) -> Verdict:
    """The verdict for the key (``key_type``, ``blob``) that host ``name`` presented."""
    mine = matching(lines, name)
    revoked = [ln for ln in mine if ln.marker == "@revoked" and ln.blob == blob]
    if revoked:
        return Verdict("revoked", revoked)
    plain = [ln for ln in mine if ln.marker == ""]
    same = [ln for ln in plain if ln.blob == blob]
    if same:
        return Verdict("known", same)
    if plain:
        return Verdict("changed", plain)
    return Verdict("unknown", [])


def preferred_key_types(lines: Sequence[HostLine], name: str, offered: Sequence[str]) -> List[str]:
    """``offered`` (host key algorithms, in paramiko's order) with the types known for ``name`` first, as ssh
    orders them, so that a board with several host keys shows us the one we know."""
    known = []
    for line in matching(lines, name):
        if line.marker == "":
            algorithms = (("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa") if line.key_type == "ssh-rsa"
                          else (line.key_type,))
            known.extend(a for a in algorithms if a in offered and a not in known)
    return known + [a for a in offered if a not in known]


def append(path: Path, name: str, key_type: str, key_base64: str) -> None:
    """Add ``name keytype key`` at the end of ``path`` (created 0600, its directory 0700)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    prefix = ""
    if path.exists() and path.stat().st_size > 0:
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                prefix = "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(f"{prefix}{name} {key_type} {key_base64}\n")


def describe(lines: Sequence[HostLine]) -> str:
    return ", ".join(line.where for line in lines)


def fingerprint_blob(blob: bytes) -> str:
    """SHA256 fingerprint as OpenSSH prints it (``SHA256:base64-without-padding``)."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


def first_type(lines: Sequence[HostLine]) -> Tuple[str, str]:
    """(key type, fingerprint) of the first line, for messages."""
    return lines[0].key_type, fingerprint_blob(lines[0].blob)
