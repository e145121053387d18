"""Writers of result files: summary tables (csv/json) and timelines (Chrome trace JSON)."""
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


def safe_name(part) -> str:
    """A file-name component: 'N/A' for missing values, anything odd replaced by '_'."""
    if part is None or part == "":
        return "N/A".replace("/", "_")
    if isinstance(part, float) and part.is_integer():
        part = int(part)
    return _UNSAFE.sub("_", str(part))
