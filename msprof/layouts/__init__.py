"""The input layouts, as plug-ins of the one pipeline (each implements msprof.contract.Layout):
``find_units(path)`` finds the result directories under a path (raw-format.md §1), gives each to the first
layout that claims it by its content, and returns the units every command loops over, in path order;
``targets(units)`` groups them into the sets of files the exports write."""
import dataclasses
import os
from collections import Counter
from pathlib import Path
from typing import List, Optional

from msprof.collection import find_result_dirs
from msprof.errors import NoCollectionError, OutputError, UsageError
from msprof.contract import Layout, Target, Unit
from msprof.layouts.framework import FrameworkLayout
from msprof.layouts.job import JobLayout
from msprof.layouts.prof import ProfLayout
from msprof.outputs import refuse_links_below

# Checked in order: a result directory belongs to the first layout that claims it (JOB claims the rest). The
# framework layout claims the PROF_ directories inside torch_npu/MindSpore directories, and makes their units
# with the PROF layout it is given.
_PROF = ProfLayout()
LAYOUTS: List[Layout] = [FrameworkLayout(_PROF), _PROF, JobLayout()]


def layout_of(result_dir: Path) -> Layout:
    return next(layout for layout in LAYOUTS if layout.claims(result_dir))


def find_units(path: Path, output: Optional[Path] = None) -> List[Unit]:
    path = Path(path)
    if path.name in ("", ".", ".."):             # "-dir ." inside a PROF_ device: its layout shows in its name
        path = Path(os.path.abspath(path))
    try:
        result_dirs = find_result_dirs(path)
    except NoCollectionError:
        lacking = next((said for said in (layout.missing(path) for layout in LAYOUTS) if said), None)
        if lacking is None:
            raise
        raise NoCollectionError(lacking) from None
    by_layout = {}
    for result_dir in result_dirs:
        by_layout.setdefault(id(layout_of(result_dir)), []).append(result_dir)
    units = [unit for layout in LAYOUTS for unit in layout.units(by_layout.get(id(layout), []), output)]
    order = {d: i for i, d in enumerate(result_dirs)}
    # (a unit of a directory around the one named is not asked for: a torch_npu directory around the PROF_
    # its analysis hands to msprof, as to the CANN msprof, whose own files it then writes itself)
    named = Path(os.path.abspath(path))
    units = [unit for unit in units if Path(os.path.abspath(unit.path)) not in named.parents]
    units = _distinct(sorted(units, key=lambda unit: order.get(unit.path, len(order))), path, output)
    return units if output is None else [_no_links_under(unit, Path(output)) for unit in units]


def _no_links_under(unit: Unit, output: Path) -> Unit:
    """Under --output, the directories of a unit's results and databases are msprof's own: a link or a file in
    their place fails the unit (exit 7), before anything is written through it."""
    if unit.problem is None:
        try:
            for directory in dict.fromkeys([unit.out] + [d.path.parent.parent for d in unit.databases]):
                refuse_links_below(output, directory)
        except OutputError as exc:
            return dataclasses.replace(unit, problem=exc)
    return unit


def _distinct(units: List[Unit], path: Path, output: Optional[Path]) -> List[Unit]:
    """Units that share a name (copies of one collection in two directories of a parent) are labelled by
    their path under ``path`` (what show and query key their sections by); under --output, where their
    results would go to one directory, they are refused."""
    outs = Counter(unit.out for unit in units)
    if output is not None and any(n > 1 for n in outs.values()):
        same = sorted(str(unit.path) for unit in units if outs[unit.out] > 1)
        raise UsageError(f"{', '.join(same)}: result directories of the same name would share their results "
                         f"under --output {output}; name one of them at a time")
    labels = Counter(unit.label for unit in units)
    return [dataclasses.replace(unit, label=os.path.relpath(unit.path, path)) if labels[unit.label] > 1 else unit
            for unit in units]


def targets(units: List[Unit], stamp: Optional[str] = None) -> List[Target]:
    """The output sets of ``units``, as their layouts group them, in the units' order (``stamp``: the CANN
    layout's time stamp, for the layouts that have one)."""
    by_layout = {}
    for unit in units:
        by_layout.setdefault(id(unit.layout), (unit.layout, []))[1].append(unit)
    made = [target for layout, mine in by_layout.values() for target in layout.targets(mine, stamp)]
    order = {id(unit): i for i, unit in enumerate(units)}
    return sorted(made, key=lambda target: min(order[id(unit)] for unit in target.units))
