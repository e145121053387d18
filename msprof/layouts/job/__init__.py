"""The SS928 JOB layout (raw-format.md §5): one result directory per device collection, analysed alone."""
import functools
from operator import itemgetter
from pathlib import Path
from typing import List, Optional

from msprof.console import notice
from msprof.contract import Database, Layout, Selection, SummaryFile, Unit
from msprof.layouts.base import ID_LIST, data_table, out_dir
from msprof.layouts.job.facts import JobFacts
from msprof.layouts.job.report import JobReport
from msprof.layouts.job.trace import timelines as job_timelines
from msprof.paths import safe_name
from msprof.spread import spread_of, with_spread
from msprof.tables import INT, Column, Table


class JobLayout(Layout):
    name = "JOB"

    def claims(self, result_dir: Path) -> bool:
        return True          # any result directory no other layout claims

    def units(self, result_dirs: List[Path], output: Optional[Path]) -> List[Unit]:
        units = []
        for path in result_dirs:
            out = out_dir(path, output)
            units.append(Unit(self, path, out, path.name, [
                Database(self.name, "main", path, out / "sqlite" / "msprof.db", functools.partial(_import, path))]))
        return units

    def report(self, unit: Unit) -> JobReport:
        return JobReport(unit)

    # --- what export summary writes (outputs.md §3) ------------------------------------------------------
    def summary_files(self, report, selection: Selection) -> List[SummaryFile]:
        iterations = report.check(selection)
        files: List[SummaryFile] = []
        label = report.unit.label
        if not report.has_tasks:
            notice(f"{label}: no HWTS task data: op_summary and op_statistic skipped")
        elif not iterations:
            notice(f"{label}: no step trace iterations: op_summary and op_statistic skipped")
        else:
            counts = dict(report.conn.execute("SELECT model_id || ':' || index_id, count(*) FROM task"
                                              " WHERE model_id IS NOT NULL GROUP BY model_id, index_id"))
            for it in iterations:
                files.append(SummaryFile(_op_summary_name(report, it), JobReport.op_summary, (it,),
                                         counts.get(f"{it.model_id}:{it.index_id}", 0)))
            for model_id in dict.fromkeys(it.model_id for it in iterations):
                last = [it for it in iterations if it.model_id == model_id][-1]
                name = (f"op_statistic_{safe_name(report.device_id)}_{last.model_id}_{last.index_id * last.batch_num}"
                        f"_{last.index_id}")
                files.append(SummaryFile(name, JobReport.op_statistic, (model_id, selection.iteration_id),
                                         sum(counts.values())))          # a scan of the model's tasks
        if report.has_acl:
            files.append(SummaryFile(_acl_statistic_name(report, iterations), JobReport.acl_statistic, (),
                                     report.count("acl_api")))
        else:
            notice(f"{label}: no ACL API data: acl_statistic skipped")
        return files

    # --- show and query (outputs.md §4) ---------------------------------------------------------------------
    def show_tables(self, report, selection: Selection, spread: bool = False) -> list:
        """AA Core metrics (op_summary of the last selected iteration), op statistic, ACL statistic, frequency."""
        iterations = report.check(selection)
        tables = []
        if iterations and report.has_tasks:
            last = iterations[-1]
            statistic = report.op_statistic(last.model_id, selection.iteration_id)
            if spread:
                statistic = with_spread(statistic, spread_of(report, JobReport.op_spread,
                                                             (last.model_id, selection.iteration_id)),
                                        itemgetter(0, 1, 3), after="Avg(us)")
            tables += [report.op_summary(last), statistic]
            others = sorted({it.model_id for it in iterations} - {last.model_id})
            if others:          # (outputs.md §4: the last recorded iteration; the other models are a flag away)
                notice(f"{report.unit.label}: AA Core metrics and op statistic of model {last.model_id}, the last "
                       f"recorded; also recorded: model {', '.join(map(str, others))} (--model-id N "
                       "--iteration-id N; msprof query lists them)")
        else:
            notice(f"{report.unit.label}: no task iterations recorded: AA Core metrics and op statistic skipped")
        if report.has_acl:
            acl = report.acl_statistic()
            tables.append(with_spread(acl, report.acl_spread, itemgetter(0, 1, 3), after="Avg(us)") if spread else acl)
        else:
            notice(f"{report.unit.label}: no ACL API data: ACL statistic skipped")
        tables.append(report.frequency())
        return tables

    def query_tables(self, report) -> list:
        rows = []
        for model in report.models() or [{"model_id": None, "model_name": None}]:
            ids = ([it.index_id for it in report.iterations(Selection(model["model_id"]))]
                   if model["model_id"] is not None else [])
            rows.append((report.device_number, model["model_id"], model["model_name"], len(ids), tuple(ids)))
        collection = Table("collection", "Collection", [Column("Device"), Column("Model Id", INT),
                                                        Column("Model Name"), Column("Iterations", INT),
                                                        Column("Iteration Ids", ID_LIST)], [rows])
        data = data_table(report)
        return [collection, data]

    def timelines(self, report, selection: Selection) -> list:
        return job_timelines(report, selection)

    def facts(self, report, idle: bool = False) -> JobFacts:
        return JobFacts(report, idle)


def _import(path: Path, target: Path, spare_cores: bool = True) -> Path:
    from msprof.layouts.job.importer import import_result_dir

    return import_result_dir(path, target, spare_cores)


def _op_summary_name(report, iteration) -> str:
    frequency = report.aic_mhz_at(iteration.start_syscnt)
    parts = [report.device_id, iteration.model_name, iteration.model_id, iteration.batch_num,
             iteration.input_pic_num, iteration.index_id * iteration.batch_num, None, frequency]
    # icache_miss_rate is not collected on SS928 data: always N/A
    return "op_summary_" + ".".join("N/A" if p is None else safe_name(p) for p in parts).replace("/", "_")


def _acl_statistic_name(report, iterations) -> str:
    """ACL calls are per process: name the file after the lowest model id and its last iteration."""
    if not iterations:
        return f"acl_statistic_{safe_name(report.device_id)}"
    lowest = min(it.model_id for it in iterations)
    last = max(it.index_id for it in iterations if it.model_id == lowest)
    return f"acl_statistic_{safe_name(report.device_id)}_{lowest}_{last}"
