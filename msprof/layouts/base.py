"""What the layouts share beside the contract (msprof.contract): where a result directory's outputs go."""
from pathlib import Path
from typing import Optional


def out_dir(path: Path, output: Optional[Path], *relative: str) -> Path:
    """Where a result directory's outputs go: itself, or OUTPUT/<name>[/<relative>] with --output."""
    if output is None:
        return Path(path)
    return Path(output).joinpath(*relative) if relative else Path(output) / Path(path).name


