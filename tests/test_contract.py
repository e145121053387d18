"""msprof.contract: a layout is one class, Layout, whose every method the pipeline calls; what it hands over."""
import inspect
import re
import shutil
from pathlib import Path

import pytest

from msprof import api, contract
from msprof.layouts import LAYOUTS, find_units, targets

ROOT = Path(__file__).resolve().parents[1]


def test_every_layout_implements_the_whole_contract():
    abstract = {name for name, member in vars(contract.Layout).items()
                if getattr(member, "__isabstractmethod__", False)}
    assert {"claims", "units", "report", "summary_files", "timelines", "show_tables", "query_tables",
            "facts"} <= abstract
    for layout in LAYOUTS:
        assert isinstance(layout, contract.Layout) and layout.name
        for name in abstract:
            assert getattr(type(layout), name) is not getattr(contract.Layout, name), (layout.name, name)

    class Partial(contract.Layout):         # a layout that leaves a method out cannot be made
        def claims(self, result_dir):
            return False

    with pytest.raises(TypeError, match="abstract"):
        Partial()


def test_the_api_calls_layouts_through_the_contract_only():
    """Every ``.layout.<method>`` api.py calls is a method of contract.Layout."""
    source = inspect.getsource(api)
    called = set(re.findall(r"\.layout\.(\w+)\(", source))
    assert called and called <= set(dir(contract.Layout)), called - set(dir(contract.Layout))


def test_targets_are_one_per_unit_in_path_order(tmp_path):

    demo = ROOT / "msprof" / "demo_data"
    for collection in demo.iterdir():
        if collection.is_dir():
            shutil.copytree(collection, tmp_path / collection.name)
    units = find_units(tmp_path)
    made = targets(units)
    assert [target.units for target in made] == [[unit] for unit in units]
    assert [(t.summary_dir, t.timeline_dir) for t in made] == [(u.out / "summary", u.out / "timeline") for u in units]
    assert {unit.layout.name for unit in units} == {"JOB", "PROF"}
