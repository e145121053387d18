"""The Ascend CANN PROF_ layout (raw-format.md §6): ``host/`` and ``device_N/`` result directories analysed
together; one unit per device (outputs in ``device_N/``), its report ATTACHing the host database."""
import dataclasses
import functools
import os
import re
from operator import itemgetter
from pathlib import Path
from typing import Dict, List, Optional

from msprof.collection import LINK_NOT_FOLLOWED
from msprof.console import log, notice
from msprof.contract import Database, Layout, Selection, SummaryFile, Target, Unit
from msprof.errors import DataError
from msprof.layouts.base import ID_LIST, out_dir
from msprof.layouts.prof import family_files
from msprof.layouts.prof.facts import ProfFacts
from msprof.layouts.prof.report import ProfReport
from msprof.layouts.prof.cann_trace import timelines as cann_timelines
from msprof.layouts.prof.trace import timelines as prof_timelines
from msprof.spread import spread_of, with_spread
from msprof.tables import INT, TEXT, Column, Table
from msprof.workers import Later, several_cores

_DEVICE = re.compile(r"^device_(\d+)$")
# where the CANN layout puts a PROF_'s exports (ecosystem.md §1)
CANN_OUTPUT = "mindstudio_profiler_output"
# chips whose api_event the reference does not parse (its ApiEventParser is registered for the others): no
# api_statistic there, as from the reference (msprof still reads the calls: they name the ops)
API_STATISTIC_NOT_WRITTEN = ("9",)
# From this many tasks show has a worker process make op_statistic (a GROUP BY over every task) while it picks
# the op_summary rows to print.
SHOW_PARALLEL_MIN_TASKS = 100_000


def has_info_json(directory: Path) -> bool:
    try:
        return directory.is_dir() and not directory.is_symlink() and any(
            p.name.startswith("info.json") and p.is_file() for p in directory.iterdir())
    except OSError:
        return False


def prof_root(result_dir: Path) -> Optional[Path]:
    """The PROF_ directory a result directory belongs to — by content, not by name: a ``host`` or
    ``device_N`` directory whose parent holds such directories (with their info.json*)."""
    parent = result_dir.parent
    if result_dir.name != "host" and not _DEVICE.match(result_dir.name):
        return None
    try:
        siblings = [p for p in parent.iterdir() if p.name == "host" or _DEVICE.match(p.name)]
    except OSError:
        return None
    if sum(1 for p in siblings if has_info_json(p)) >= 2 or (parent / "host").is_dir() or (
            _DEVICE.match(result_dir.name) and _device_data(result_dir)):
        return parent
    return None


def _device_data(directory: Path) -> bool:
    """A device directory (of a PROF_ without its host) holding none of the files only a JOB has."""
    try:
        names = [p.name.lower() for p in (directory / "data").iterdir()]
    except OSError:
        return False
    return not any(n.startswith(("aclmodule.", "aacore.data", "ts_track.data")) or n.endswith((".net.info",
                                                                                            ".layer.info"))
                   for n in names)


class ProfLayout(Layout):
    name = "PROF"

    def claims(self, result_dir: Path) -> bool:
        return prof_root(result_dir) is not None

    def units(self, result_dirs: List[Path], output: Optional[Path]) -> List[Unit]:
        roots: Dict[Path, None] = {}
        for path in result_dirs:
            roots.setdefault(prof_root(path))
        units = []
        for root in roots:
            base = out_dir(root, output)
            host = root / "host"
            host_db = None
            if os.path.islink(host):
                log.warning("%s: %s", host, LINK_NOT_FOLLOWED)
            elif os.path.isdir(host) and not os.access(host, os.R_OK | os.X_OK):
                log.warning("%s: cannot read (Permission denied): the host's data are not read (op names, models, "
                            "API statistic)", host)
            elif has_info_json(host):
                host_db = Database(self.name, "host", host, base / "host" / "sqlite" / "msprof.db",
                                   functools.partial(_import, host, "host"))
            elif os.path.isdir(host / "data"):      # (its records cannot be read without the host's metadata)
                log.warning("%s: no info.json*: the host's data are not read (op names, models, API statistic)",
                            host)
            elif not os.path.lexists(host):
                # (every table then differs from a whole collection's: op_summary empty, one "single-op" model)
                log.warning("%s: no host/ directory: op names, models and the API statistic are unknown; the "
                            "device's tasks are reported by their task type", root)
            candidates = sorted((p for p in root.iterdir() if _DEVICE.match(p.name)),
                                key=lambda p: int(_DEVICE.match(p.name).group(1)))
            # a device directory the user may not list is said as such, not passed over as no device
            locked = [p for p in candidates if not os.path.islink(p) and os.path.isdir(p)
                      and not os.access(p, os.R_OK | os.X_OK)]
            devices = [p for p in candidates if p not in locked and has_info_json(p)]
            for link in (p for p in candidates if os.path.islink(p)):
                log.warning("%s: %s", link, LINK_NOT_FOLLOWED)
            if host not in result_dirs:             # -dir PROF_x/device_N: that device only
                devices = [d for d in devices if d in result_dirs]
                locked = []
            for device in locked:
                units.append(Unit(self, device, base / device.name, f"{root.name}/{device.name}",
                                  problem=DataError.unreadable(device, PermissionError(13, "Permission denied"))))
            if not candidates and host_db is not None and host in result_dirs:
                # API-only profiling, or a collection whose devices' data are gone: the host's API statistic
                # and calls, as the reference reports them (Device_id "host"), beside an empty device database
                # (a device_N there that cannot be read stays the error below: its data are not all reported)
                out = base / "host"
                none = Database(self.name, "main", host, out / "sqlite" / "no_device.db",
                                functools.partial(_import, host, "none"), empty_ok=True)
                units.append(Unit(self, host, out, f"{root.name}/host", [host_db, none]))
            elif not devices and not locked:
                units.append(Unit(self, root, base, root.name, problem=DataError(
                    f"{root}: no device_N directory with an info.json* (nothing to report on)")))
            for device in devices:
                out = base / device.name
                # (a device that recorded nothing — a run on several devices where the app used one — is a
                # device without tasks, as the reference takes it: its host's API statistic is still written)
                own = Database(self.name, "main", device, out / "sqlite" / "msprof.db",
                               functools.partial(_import, device, "device"), empty_ok=True)
                units.append(Unit(self, device, out, f"{root.name}/{device.name}",
                                  ([host_db] if host_db else []) + [own]))
        return units

    def targets(self, units: List[Unit], stamp: Optional[str] = None) -> List[Target]:
        """One target per unit; in the CANN layout (``stamp``), one per PROF_ directory: its devices' tables in
        one file per kind in PROF_x/mindstudio_profiler_output/ (docs/prof.md "The CANN layout")."""
        if stamp is None:
            return super().targets(units)
        groups: Dict[Path, List[Unit]] = {}
        for unit in units:
            # (a device's or the host's outputs go to <base>/device_N or <base>/host; a PROF_ that failed, to <base>)
            in_root = unit.path.name == "host" or _DEVICE.match(unit.path.name)
            groups.setdefault(unit.out.parent if in_root else unit.out, []).append(unit)
        # (the devices in the order of their names as text, device_10 before device_2, as the reference merges them)
        return [Target(sorted(mine, key=lambda unit: unit.path.name), base / CANN_OUTPUT, base / CANN_OUTPUT, stamp)
                for base, mine in groups.items()]

    def report(self, unit: Unit) -> ProfReport:
        return ProfReport(unit)

    def timelines(self, report, selection: Selection, cann: bool = False, host: bool = True) -> list:
        if cann:
            return cann_timelines(report, selection, host)
        return prof_timelines(report, selection)

    def facts(self, report, idle: bool = False) -> ProfFacts:
        return ProfFacts(report, idle)

    # --- what export summary writes (docs/prof.md) -----------------------------------------------------------
    def summary_files(self, report, selection: Selection) -> List[SummaryFile]:
        report.check(selection)
        suffix = (f"_model{selection.model_id}" if selection.model_id is not None else "") + (
            f"_iter{selection.iteration_id}" if selection.iteration_id is not None else "")
        files: List[SummaryFile] = []
        label = report.unit.label
        if report.has_tasks:
            tasks = report.count("task")
            # weights: the measured cost of each file per task (docs/performance.md), so that two processes finish
            # together; the parts even out the end
            if selection.everything:
                # op_statistic from the sums op_summary's pass gathers (its own query joins every task again)
                files.append(SummaryFile("op_summary", ProfReport.op_summary_and_task_time, (), tasks * 12, parts=8,
                                         also=("task_time",)))
                files.append(SummaryFile("op_statistic", ProfReport.op_statistic, (selection,), 1, after="op_summary"))
            else:
                files.append(SummaryFile("op_summary" + suffix, ProfReport.op_summary, (selection,), tasks * 10,
                                         parts=8))
                files.append(SummaryFile("op_statistic" + suffix, ProfReport.op_statistic, (selection,),
                                         tasks * 3 // 2))
        else:
            notice(f"{label}: no device task data: op_summary, op_statistic and task_time skipped")
        if not report.has_api:
            notice(f"{label}: no host API data: api_statistic skipped")
        elif report.platform in API_STATISTIC_NOT_WRITTEN:
            notice(f"{label}: api_statistic not written on platform {report.platform}, as the reference does not "
                   "parse api_event there")
        elif selection.everything:
            # (its cost: the groups the import counted, read twice)
            files.append(SummaryFile("api_statistic", ProfReport.api_statistic, (),
                                     report.conn.execute("SELECT count(*) FROM host.api_duration").fetchone()[0]))
        families = family_files.present_names(report)
        if selection.everything:
            files += family_files.summary_files(families)
        else:
            # (an api_statistic named for the selection held every call of the run, as task_time would)
            files += family_files.summary_files(families, selection, suffix)
            whole = [name for name, written in (
                ("api_statistic", report.has_api and report.platform not in API_STATISTIC_NOT_WRITTEN),
                ("task_time", report.has_tasks)) if written] + [
                name for name in families if not family_files.FILES[name].iteration_keys]
            if whole:
                notice(f"{label}: {' and '.join(whole)} cover{'s' if len(whole) == 1 else ''} the whole run: an "
                       f"export without --model-id and --iteration-id writes {'it' if len(whole) == 1 else 'them'}")
        return files


    # --- show and query (outputs.md §4) ---------------------------------------------------------------------
    def show_tables(self, report, selection: Selection, spread: bool = False) -> list:
        report.check(selection)
        tables = []
        if report.has_tasks:
            context = {"device_id": report.device_number, "model_id": selection.model_id,
                       "iteration_id": selection.iteration_id}
            later = None
            if report.count("task") >= SHOW_PARALLEL_MIN_TASKS and several_cores():
                later = Later(report, ProfReport.op_statistic_rows, (selection,))       # (started by show: api.show)
            statistic = report.op_statistic(selection, later)
            if spread:
                statistic = with_spread(statistic, spread_of(report, ProfReport.op_spread, (selection,)),
                                        itemgetter(1, 2), after="Avg Time(us)",
                                        names=("Median Time(us)", "StdDev Time(us)"))
            statistic = dataclasses.replace(statistic, title=f"Op statistic (device {report.device_id})",
                                            context=context, sort="Total Time(us)")
            # the task columns of op_summary: its PMU columns belong in the summary files
            summary = dataclasses.replace(
                report.op_summary(selection, pmu=False, as_file=False).select(0, 12),
                title=f"Op summary (device {report.device_id})",
                context=context, sort="Task Duration(us)")
            tables += [summary, statistic]
        else:
            notice(f"{report.unit.label}: no device task data: op tables skipped")
        if report.has_api:
            api = report.api_statistic()
            if spread:
                api = with_spread(api, report.api_spread, itemgetter(2, 1), after="Avg(us)")
            tables.append(dataclasses.replace(api, title="API statistic (host)", sort="Time(us)"))
        return tables + family_files.show_tables(report, selection)

    def query_tables(self, report) -> list:
        rows = []
        ran = report.device_models()
        models = [m for m in report.models() if ran is None or m["model_id"] in ran]
        for m in models or [{"model_id": None, "model_name": None, "iterations": 0}]:
            ids = list(range(1, (m["iterations"] or 0) + 1))
            rows.append((report.device_number, report.platform, m["model_id"], m["model_name"], m["iterations"],
                         tuple(ids)))
        collection = Table("collection", "Collection", [
            Column("Device", INT), Column("Platform"), Column("Model Id", INT), Column("Model Name"),
            Column("Iterations", INT), Column("Iteration Ids", ID_LIST)], [rows])
        data = []
        for schema in ("host", "main"):
            directory = "host" if schema == "host" else report.unit.path.name
            data += [(directory, kind, records, lost) for kind, records, lost in report.conn.execute(
                f"SELECT kind, sum(records), sum(head_lost + tail_lost) FROM {schema}.decode_count"
                " GROUP BY kind ORDER BY kind")]
        table = Table("data", "Data", [Column("Directory"), Column("Data", TEXT), Column("Records", INT),
                                       Column("Bytes lost", INT)], [data])
        families = family_files.families_table(report)       # (none without a family: query as before them)
        return [collection, table] + ([families] if families is not None else [])


def _import(path: Path, role: str, target: Path, spare_cores: bool = True) -> Path:
    from msprof.layouts.prof.importer import import_result_dir

    return import_result_dir(path, role, target, spare_cores and several_cores())
