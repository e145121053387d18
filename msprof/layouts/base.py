"""What the layouts share beside the contract (msprof.contract): where a result directory's outputs go,
and the pieces of their query tables."""
from pathlib import Path
from typing import Optional

def out_dir(path: Path, output: Optional[Path], *relative: str) -> Path:
    """Where a result directory's outputs go: itself, or OUTPUT/<name>[/<relative>] with --output."""
    if output is None:
        return Path(path)
    return Path(output).joinpath(*relative) if relative else Path(output) / Path(path).name


def id_ranges(ids) -> Optional[str]:
    """[1,2,3,5] → '1-3,5'."""
    parts, start, prev = [], None, None
    for i in sorted(ids):
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = i
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(parts) or None
