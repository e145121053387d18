"""The CANN msprof's own syntax as library calls (docs/cli-reference.md "The CANN syntax"): ``msprof --export=on``
exports where the Ascend tools read, ``msprof --analyze=on`` (and ``msprof analyze``) writes the communication
analyses. Built on msprof.api's export commands; msprof.cann parses the options."""
import time
from pathlib import Path
from typing import List, Optional, Sequence

from msprof.api import announce, export_summary, export_timeline
from msprof.console import notice
from msprof.contract import Selection
from msprof.errors import UsageError
from msprof.frame import Failures, reading
from msprof.layouts import find_units, targets
from msprof.paths import printable

# the rules of the CANN msprof's --analyze (both of HCCL data)
ANALYZE_RULES = ("communication", "communication_matrix")


def cann_export(path: Path, selection: Selection = Selection(), fmt: str = "csv") -> List[Path]:
    """``msprof --export=on --output=PATH``: every collection under ``path`` exported where the Ascend tools
    read it — a PROF_'s devices in one time-stamped file per kind in PROF_x/mindstudio_profiler_output/ (the
    CANN layout), a JOB's files in their usual places."""
    path = _whole_prof(path)
    stamp = time.strftime("%Y%m%d%H%M%S")
    # (the timeline first: torch_npu reads it as soon as it sees the first csv file)
    written = export_timeline(path, selection, stamp=stamp) + export_summary(path, fmt, selection, stamp=stamp)
    from msprof.layouts.prof import CANN_OUTPUT
    from msprof.merged import write_readme

    for directory in dict.fromkeys(p.parent for p in written if p.parent.name == CANN_OUTPUT):
        write_readme(directory)      # (what the files are, as the reference writes beside its own)
    return written


def _whole_prof(path: Path) -> Path:
    """A PROF_'s ``host`` or ``device_N`` directory as --output means the whole PROF_: its files hold every
    device (the CANN msprof exports that device alone)."""
    from msprof.layouts.prof import has_info_json, prof_root

    root = prof_root(Path(path)) if has_info_json(Path(path)) else None
    if root is None:
        return path
    notice(f"{printable(path)}: exporting the whole {printable(root.name)}, whose files hold every device")
    return root


def cann_analyze(path: Path, rules: Sequence[str] = ANALYZE_RULES, output: Optional[Path] = None) -> List[Path]:
    """``msprof --analyze=on --output=PATH`` (and ``msprof analyze -dir PATH``): the communication analyses
    (``rules``) of every PROF_ under ``path``, from its HCCL data, written in PROF_x/analyze/ (under ``output``
    when given; msprof.layouts.prof.families.hccl_analysis); a PROF_ without HCCL data gets none (as with the
    CANN msprof, which succeeds)."""
    from msprof.layouts.prof.families.hccl_analysis import write_analyses
    from msprof.layouts.prof.family_files import device_executions

    unknown = [rule for rule in rules if rule not in ANALYZE_RULES]
    if unknown:
        raise UsageError(f"--rule={','.join(unknown)}: unknown rule; the rules are {', '.join(ANALYZE_RULES)}")
    units = find_units(path, output)
    merged = [target for target in targets(units, time.strftime("%Y%m%d%H%M%S")) if target.merged is not None]
    if not merged:
        raise UsageError(f"{printable(path)}: --analyze=on analyses PROF_ directories, and there is none here")
    failures = Failures(len(units))
    written: List[Path] = []
    for target in merged:
        root = target.summary_dir.parent
        devices = []
        # (the reference's order, device directories by name descending: the last one's clock times the file)
        for unit in sorted(target.units, key=lambda u: u.path.name, reverse=True):
            with failures.each(unit), reading(unit, "--analyze=on", target) as report:
                devices.append(device_executions(report))
        files = write_analyses(root, [found for found in devices if found], rules)
        if not files:
            notice(f"{printable(root)}: no communication (HCCL) data, nothing to analyse")
        written += files
    announce(written)
    failures.done()
    return written
