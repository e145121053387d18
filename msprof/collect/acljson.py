"""Build the ``acl.json`` uploaded beside ``main``: the project's own file plus our profiler section."""
import json
from pathlib import Path
from typing import Optional

from msprof.collect.config import FileRefused, read_small_file
from msprof.console import log
from msprof.errors import ConfigError, UsageError

ON_OFF = ("on", "off")
MAX_ACL_BYTES = 1 << 20

# AA core metric sets the SVP profiler accepts (canonical spelling). ArithmeticUtilization is the one whose
# PMU events msprof decodes into op_summary metrics; the others are passed through to the board.
AAC_METRICS = ("ArithmeticUtilization", "PipeUtilization", "Memory", "MemoryL0", "MemoryUB",
               "ResourceConflictRatio")


def normalize_on_off(value: str, option: str) -> str:
    text = str(value).strip().lower()
    if text not in ON_OFF:
        raise UsageError(f"{option} must be 'on' or 'off', not {value!r}")
    return text


def normalize_metric(value: str, option: str = "--aac_metrics") -> str:
    for name in AAC_METRICS:
        if name.lower() == str(value).strip().lower():
            return name
    raise UsageError(f"{option}: unknown metric set {value!r}; choose one of {', '.join(AAC_METRICS)}")


def normalize_interval(value) -> str:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise UsageError(f"--interval must be a whole number of milliseconds >= 0, not {value!r}") from None
    if number < 0:
        raise UsageError(f"--interval must be >= 0, not {number}")
    return str(number)


def profiler_section(output: str, switch: str = "on", interval="0", acl_api: str = "on", aacpu: str = "on",
                     aac_metrics: str = "ArithmeticUtilization") -> dict:
    """The ``profiler`` object, all values strings as the board runtime expects."""
    return {
        "switch": normalize_on_off(switch, "--switch"),
        "output": output,
        "interval": normalize_interval(interval),
        "acl_api": normalize_on_off(acl_api, "--acl_api"),
        "aacpu": normalize_on_off(aacpu, "--aacpu"),
        "aac_metrics": normalize_metric(aac_metrics),
    }


def read_project_acl(path: Path) -> Optional[dict]:
    """The project's existing acl.json as a dict, None when absent; ConfigError (exit 5) when invalid."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        text = read_small_file(path, MAX_ACL_BYTES).decode("utf-8-sig")
    except FileRefused as exc:
        raise ConfigError(f"{path} {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object at the top level, found {type(data).__name__}")
    return data


def merge(existing: Optional[dict], profiler: dict, source: str = "acl.json") -> dict:
    """Keep the project's other keys; our profiler values win over theirs. Profiling and dump must not
    run together: with the profiler switched on, a ``dump`` section is left out (with a warning)."""
    data = dict(existing or {})
    old = data.get("profiler")
    section = dict(old) if isinstance(old, dict) else {}
    section.update(profiler)
    data["profiler"] = section
    if profiler.get("switch") == "on" and "dump" in data:
        del data["dump"]
        log.warning("%s has a dump section; profiling and dump must not run together, so it was left out of "
                    "the acl.json uploaded to the board (your local file is unchanged)", source)
    return data


def dumps(data: dict) -> bytes:
    return (json.dumps(data, indent=4, ensure_ascii=False) + "\n").encode("utf-8")
