"""PROF layout: decoders, import bookkeeping, bad data, selection, query, timeline and CLI exit codes."""
from __future__ import annotations

import copy
import json
import shutil
import sqlite3
import struct
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fixtures import indepgen  # noqa: E402
from fixtures import profgen as pg  # noqa: E402
from reference_runner import read_csv  # noqa: E402
from test_profgen import (MULTI, TIED_ONCE, assert_rows_equal, expected_api_statistic, expected_op_statistic,  # noqa: E402
                          expected_task_time)

from msprof import api  # noqa: E402
from msprof.decode.api_event import ApiEventDecoder  # noqa: E402
from msprof.decode.base import IMPOSSIBLE_TIMES, Blocks, Rows, Tally  # noqa: E402
from msprof.decode.dicts import HashDecoder, TypeInfoDecoder  # noqa: E402
from msprof.decode.stars import stars_ids  # noqa: E402
from msprof.errors import UsageError  # noqa: E402
from msprof.layouts.prof.report import ProfReport  # noqa: E402
from msprof.contract import Selection, SummaryFile  # noqa: E402
from msprof.metrics import AscendMetrics, aicore_time_sql, counter_ratios  # noqa: E402
from msprof.show import View  # noqa: E402
from msprof.events import TASK_PID_BASE  # noqa: E402
from msprof.tracecheck import check_trace  # noqa: E402
from test_profgen import r3_half_up as round3  # noqa: E402

EVENT_END = (1 << 64) - 1


def summary(prof_dir: Path, device=0, **kw):
    api.export_summary(prof_dir, "csv", **kw)
    out = prof_dir / f"device_{device}" / "summary"
    return {p.stem: read_csv(p) for p in out.glob("*.csv")}


def notices(result_dir: Path):
    with sqlite3.connect(result_dir / "sqlite" / "msprof.db") as conn:
        return [m for (m,) in conn.execute("SELECT message FROM notice")]


# ---------------------------------------------------------------------------------------------- decoders
def test_api_event_decoder_splits_apis_events_and_skips_bad_records():
    good = struct.pack("<HHIIIQQQ", 0x5A5A, 10000, 1, 7, 0, 100, 200, (1 << 64) - 5)
    event = struct.pack("<HHIIIQQQ", 0x5A5A, 15000, 1, 7, 3, 150, EVENT_END, 1)
    bad_magic = struct.pack("<HHIIIQQQ", 0x1234, 10000, 1, 7, 0, 100, 200, 1)
    bad_level = struct.pack("<HHIIIQQQ", 0x5A5A, 12345, 1, 7, 0, 100, 200, 1)
    zero_begin = struct.pack("<HHIIIQQQ", 0x5A5A, 10000, 1, 7, 0, 0, 200, 1)
    tally = Tally(40)
    apis, events = ApiEventDecoder().decode(good + event + bad_magic + bad_level + zero_begin, tally)
    assert apis.rows == [(10000, 1, 7, 0, 100, 200, -5)]        # hash stored as signed 64-bit
    # (the last value: the event's place in the api_event stream, its connection_id: after the good call)
    assert events.rows == [(15000, 1, 7, 3, 150, 1, 1)]
    assert tally.counts == {"bad magic": 1, "unknown level": 1, "API with begin 0": 1}
    assert tally.first == {"bad magic": 80, "unknown level": 120, "API with begin 0": 160}   # stream offsets
    # a chunk of valid calls only is decoded whole: the same values
    [blocks] = ApiEventDecoder().decode(good * 3, Tally(40))
    assert [tuple(b) for b in blocks.blocks] == [(10000, 1, 7, 0, 100, 200, -5) * 3]


def _api_and_event_rows(parts) -> tuple:
    """The api rows (of Blocks and Rows alike) and the event rows of a decoder's output."""
    apis, events = [], []
    for part in parts:
        if isinstance(part, Rows):
            (apis if part.table == "api" else events).extend(part.rows)
        else:
            width = part.layout.width
            for block in part.blocks:
                apis += [tuple(block[i:i + width]) for i in range(0, len(block), width)]
    return apis, events


def test_api_event_chunk_of_calls_and_a_few_events_is_decoded_whole_with_the_same_rows():
    """Events are a few records among many calls (a model's executions, msproftx markers): the calls of such a
    chunk are still unpacked whole, the events and damaged ends (top bit set) taken out one by one. Rows and
    skips as record by record would give them (2M records took 1.4 s one by one)."""
    def call(i):
        return struct.pack("<HHIIIQQQ", 0x5A5A, (10000, 5000)[i % 2], i % 3, 7, 0, 1000 + i, 2000 + 3 * i, i)

    records = [call(i) for i in range(64)]
    records[5] = struct.pack("<HHIIIQQQ", 0x5A5A, 15000, 1, 7, 3, 150, EVENT_END, 1)
    records[40] = struct.pack("<HHIIIQQQ", 0x5A5A, 15000, 1, 7, 3, 170, EVENT_END, 1)
    records[41] = struct.pack("<HHIIIQQQ", 0x5A5A, 10000, 1, 7, 0, 100, (1 << 63) + 1, 1)     # damaged end
    tally = Tally(40)
    tally.base = 4000
    parts = ApiEventDecoder().decode(b"".join(records), tally)
    assert any(isinstance(part, Blocks) for part in parts)              # the whole-chunk path was taken
    apis, events = _api_and_event_rows(parts)
    assert apis == [((10000, 5000)[i % 2], i % 3, 7, 0, 1000 + i, 2000 + 3 * i, i) for i in range(64)
                    if i not in (5, 40, 41)]
    # (the last value: the event's place in the stream, its connection_id; the damaged record after them takes none)
    assert events == [(15000, 1, 7, 3, 150, 1, 5), (15000, 1, 7, 3, 170, 1, 40)]
    assert tally.counts == {IMPOSSIBLE_TIMES: 1}
    assert tally.first == {IMPOSSIBLE_TIMES: 4000 + 41 * 40}
    # the same chunk record by record (too many events for the whole path): the same rows and skips
    many = list(records)
    for i in range(0, 64, 4):
        many[i] = records[5]
    tally = Tally(40)
    apis, events = _api_and_event_rows(ApiEventDecoder().decode(b"".join(many), tally))
    assert apis == [((10000, 5000)[i % 2], i % 3, 7, 0, 1000 + i, 2000 + 3 * i, i) for i in range(64)
                    if i % 4 and i not in (5, 40, 41)]
    assert len(events) == 16 + 1 and tally.counts == {IMPOSSIBLE_TIMES: 1}
    # a call with begin 0 among them (dropped, as the reference drops it): still the same rows and skips
    zero = list(records)
    zero[20] = struct.pack("<HHIIIQQQ", 0x5A5A, 10000, 1, 7, 0, 0, 2000, 20)
    tally = Tally(40)
    apis, events = _api_and_event_rows(ApiEventDecoder().decode(b"".join(zero), tally))
    assert apis == [((10000, 5000)[i % 2], i % 3, 7, 0, 1000 + i, 2000 + 3 * i, i) for i in range(64)
                    if i not in (5, 20, 40, 41)]
    assert [row[-1] for row in events] == [5, 39]      # (the call with begin 0 takes no place, as in the reference)
    assert tally.counts == {IMPOSSIBLE_TIMES: 1, "API with begin 0": 1}
    assert tally.first == {IMPOSSIBLE_TIMES: 41 * 40, "API with begin 0": 20 * 40}


def test_op_statistic_ratio_of_a_zero_total_is_a_float(tmp_path):
    """Every task of zero duration: op_statistic's Ratio(%) has nothing to divide by and is 0.0, the
    reference's text (it was 0)."""
    prof_dir = Path(indepgen.generate(tmp_path, "--seed 3 --ops 5 --iters 1 --models 1 --zero-dur 1".split()))
    rows = summary(prof_dir)["op_statistic"]
    assert rows and {(row["Total Time(us)"], row["Ratio(%)"]) for row in rows} == {("0.0", "0.0")}


def test_api_event_time_stamps_of_2_63_or_more_are_skipped_and_the_collection_still_reported(tmp_path):
    """A damaged api_event record with a begin (or end, or event time) of 2^63 or more: skipped and counted,
    never decoded whole (its duration would not fit SQLite's integers: "internal error: OverflowError" for
    every command, found by a newcomer's fuzzing)."""
    good = struct.pack("<HHIIIQQQ", 0x5A5A, 10000, 1, 7, 0, 100, 200, 1)
    begin = struct.pack("<HHIIIQQQ", 0x5A5A, 10000, 1, 7, 0, (1 << 63) + 12345, 200, 1)
    end = struct.pack("<HHIIIQQQ", 0x5A5A, 10000, 1, 7, 0, 100, (1 << 63) + 1, 1)
    event = struct.pack("<HHIIIQQQ", 0x5A5A, 15000, 1, 7, 3, 1 << 63, EVENT_END, 1)
    tally = Tally(40)
    apis, events = ApiEventDecoder().decode(good + begin + end + event + good, tally)
    assert apis.rows == [(10000, 1, 7, 0, 100, 200, 1)] * 2 and events.rows == []
    assert tally.counts == {IMPOSSIBLE_TIMES: 3} and tally.first == {IMPOSSIBLE_TIMES: 40}
    # a chunk of calls alone (the whole-chunk path) with one such end: skipped alike (the review found it kept)
    tally = Tally(40)
    parts = ApiEventDecoder().decode(good + end + good, tally)
    assert [row for part in parts if isinstance(part, Rows) and part.table == "api" for row in part.rows] == \
        [(10000, 1, 7, 0, 100, 200, 1)] * 2
    assert tally.counts == {IMPOSSIBLE_TIMES: 1}
    # end to end: the first call of the host's api_event file damaged so
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "1", "--ops", "6", "--iters", "3"]))
    path = next((prof_dir / "host" / "data").glob("*api_event*"))
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 16, (1 << 63) + 12345)
    path.write_bytes(data)
    tables = summary(prof_dir)
    assert {"op_summary", "op_statistic", "api_statistic"} <= set(tables)
    assert "1 api_event record(s) skipped (time stamp of 2^63 or more, or an end before its start)" in " ".join(notices(prof_dir / "host"))


def test_op_names_hash_dic_does_not_name_are_said(tmp_path):
    """Without hash_dic the op names and types are their hash ids (as the reference shows them): the import says
    so, and how many (found by a newcomer's trial: silent)."""
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "1", "--ops", "6", "--iters", "2"]))
    for path in (prof_dir / "host" / "data").glob("*hash_dic*"):
        path.unlink()
    tables = summary(prof_dir)
    with sqlite3.connect(prof_dir / "host" / "sqlite" / "msprof.db") as conn:
        hashes = {t for row in conn.execute("SELECT op_name, op_type FROM op WHERE ge = 1") for t in row}
    assert hashes and all(t.isdigit() for t in hashes)
    assert {r["Op Name"] for r in tables["op_summary"]} <= hashes
    said = [m for m in notices(prof_dir / "host") if "hash_dic" in m]
    assert said == [f"{len(hashes)} op name/type hash id(s) not in hash_dic (none in {prof_dir / 'host' / 'data'}): "
                    "shown as their numbers, as the reference shows them"]


def test_a_host_directory_without_info_json_is_said(tmp_path, msprof_cli):
    """host/ with data but no info.json* cannot be read: said on every command (it was passed over silently,
    the only trace a missing api_statistic; found by a newcomer's trial)."""
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "1", "--ops", "4", "--iters", "2"]))
    for path in (prof_dir / "host").glob("info.json*"):
        path.unlink()
    proc = msprof_cli("export", "summary", "-dir", prof_dir)
    assert proc.returncode == 0, proc.stderr
    assert (f"msprof: warning: {prof_dir / 'host'}: no info.json*: the host's data are not read (op names, models, "
            "API statistic)") in proc.stderr
    assert not (prof_dir / "host" / "sqlite").exists()


def test_text_dictionaries_and_stars_ids():
    tally = Tally(1)
    [types] = TypeInfoDecoder().decode(["20000_131073:aclmdlExecute", "777_1:x"], tally)
    assert types.rows == [(20000, 131073, "aclmdlExecute")]
    [hashes] = HashDecoder().decode(["%d:conv1" % ((1 << 64) - 1), "abc:def"], tally)
    assert hashes.rows == [(-1, "conv1")]
    assert tally.counts == {"unreadable line": 2}
    assert stars_ids(5, 9) == (5, 9)
    assert stars_ids(0x1000 | 0x2005, 0x0009) == (5, 0x2009)
    assert stars_ids(0x2000 | 0x003, 0x1007) == (7, 0x1003)


def metric_values(metrics, cycles, counters, aic_mhz, block_num, core_num, dur_ns):
    """The metric columns evaluated by SQLite on one PMU row, and the renderer's rounding where the
    reference rounds with Python's round()."""
    conn = sqlite3.connect(":memory:")
    conn.create_function("py_round", 2, round)
    conn.execute("CREATE TABLE p (seq, total_cycles, %s)" % ", ".join(f"c{i}" for i in range(8)))
    conn.execute("INSERT INTO p VALUES (1, ?, %s)" % ", ".join("?" * 8), [cycles] + list(counters))
    aicore = "py_round(%s, 2)" % aicore_time_sql("total_cycles", str(block_num), aic_mhz, core_num)
    outer = metrics.outer(repr(float(dur_ns)), aic_mhz, core_num) + [f"{aicore} AS a2"]
    columns = metrics.column_sql("a2", aic_mhz)       # SQLite-rounded columns rounded by SQLite, as the kind says
    exprs = [f"round({expr}, 3)" if printed == "sqlite" else expr for _name, printed, expr in columns]
    row = conn.execute("SELECT %s FROM (SELECT *, %s FROM (SELECT *, %s FROM p))" % (
        ", ".join(exprs), ", ".join(outer), ", ".join(counter_ratios() + metrics.inner()))).fetchone()
    return [round(v, 3) if printed == "python" else v for v, (_n, printed, _e) in zip(row, columns)]


def test_metric_tables_hand_computed():
    pipe = AscendMetrics("PipeUtilization", [0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x54, 0x55], "1")
    values = dict(zip(pipe.names, metric_values(pipe, 20000, [1250, 2500, 3750, 5000, 6250, 7500, 8750, 10000],
                                                1000.0, 8, 8, 20000.0)))
    # aicore_time = 20000 cycles / 1000 MHz / 8 blocks * ceil(8/8) = 2.5 µs
    assert values["aicore_time(us)"] == 2.5 and values["total_cycles"] == 20000
    assert values["mac_ratio"] == 0.125 and values["mte2_ratio"] == round3(0.3125) == 0.313
    assert values["memory_bound"] == round(0.313 / 0.125, 3) == 2.504      # from the rounded ratios
    assert values["icache_miss_rate"] == round3(10000 / 8750)
    assert values["cube_utilization(%)"] == 12.5
    arith = AscendMetrics("ArithmeticUtilization", [0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x4F, 0x50], "2")
    v = dict(zip(arith.names, metric_values(arith, 1000, [10, 20, 30, 40, 50, 60, 70, 80], 1000.0, 1, 8, 1000.0)))
    assert v["cube_fops"] == 10 * 8192 + 20 * 16384
    assert v["vector_fops"] == 30 * 64 + 40 * 128 + 50 * 64 + 60 * 16 + 70 * 16   # chip v3 weights
    assert v["vec_fp16_ratio"] == 0.09
    unknown = AscendMetrics("Foo", [0x123], "1")
    assert unknown.names == ["aicore_time(us)", "total_cycles", "0x123"]
    # an event named twice: each column its own slot's counter
    twice_unknown = AscendMetrics("Foo", [0x123, 0x123], "1")
    assert metric_values(twice_unknown, 10, [3, 4, 0, 0, 0, 0, 0, 0], 1000.0, 1, 8, 1000.0)[2:] == [3, 4]
    custom = AscendMetrics("Custom:0x123,0x8", [0x123, 0x8], "1")      # the reference's names: r<id>
    assert custom.names == ["aicore_time(us)", "total_cycles", "r123", "r8"]
    assert metric_values(custom, 0, [7, 9, 0, 0, 0, 0, 0, 0], 1000.0, 1, 8, 1000.0)[2:] == [7.0, 9.0]
    # named as written ("0x08" → r08, "0xA" → rA); a repeated event keeps its own counter
    assert AscendMetrics("Custom:0x08,0xA", [0x8, 0xA], "1", ["0x08", "0xA"]).names[2:] == ["r08", "rA"]
    twice = AscendMetrics("Custom:0x8,0x8,0x15", [0x8, 0x8, 0x15], "1", ["0x8", "0x8", "0x15"])
    assert twice.names[2:] == ["r8", "r8#2", "r15"]
    assert metric_values(twice, 10, [3, 4, 5, 0, 0, 0, 0, 0], 1000.0, 1, 8, 1000.0)[2:] == [3.0, 4.0, 5.0]


def test_bandwidth_hand_computed():
    events = [0x15, 0x16, 0x31, 0x32, 0xF, 0x10, 0x12, 0x13]
    memory = AscendMetrics("Memory", events, "1")
    # 1000 cycles at 1000 MHz = 1 µs; ub_read: 8 counts of 256 B × 4 = 8192 B in 1 µs = 8192e6 B/s, in GiB/s
    # (2^30 B) 7.62939…, and the reference's GB/s divides by 2^33 (bits): 0.953674…
    v = dict(zip(memory.names, metric_values(memory, 1000, [8, 0, 0, 0, 5, 5, 1, 0], 1000.0, 1, 8, 1000.0)))
    assert v["ub_read_bw(GB/s)"] == 0.954 and v["ub_write_bw(GB/s)"] == 0.0
    assert v["main_mem_read_bw(GB/s)"] == round3(64 * 1e6 / 2 ** 33) == 0.007      # 8 B × 8 per count, in 1 µs
    assert "l2_read_bw(GB/s)" not in v and "l2_write_bw(GB/s)" not in v             # the reference drops them
    # without cycles: each raw counter; without a frequency: 0
    assert metric_values(memory, 0, [8, 3, 0, 0, 0, 0, 1, 0], 1000.0, 1, 8, 1000.0)[2:4] == [8.0, 3.0]
    assert metric_values(memory, 1000, [8, 3, 0, 0, 0, 0, 1, 0], None, 1, 8, 1000.0)[2:4] == [0.0, 0.0]
    # a set missing one of its events: raw counters, as for an unknown set
    assert AscendMetrics("Memory", events[:7], "1").names[2:] == [f"0x{e:x}" for e in events[:7]]


# ---------------------------------------------------------------------------------------------- import
def test_import_bookkeeping_freshness_and_small_chunks(tmp_path, monkeypatch):
    desc = dict(MULTI, pmu="PipeUtilization", slices={"api_event": 3, "hwts": 3, "task_track": 2, "aicore": 2})
    prof = pg.build(desc)
    prof_dir = pg.write_prof(tmp_path, desc)
    from msprof.decode import slices

    monkeypatch.setattr(slices, "CHUNK_BYTES", 200)   # records straddle chunks and slices everywhere
    dbs = api.import_collection(prof_dir)
    assert [d.parent.parent.name for d in dbs] == ["host", "device_0"]
    with sqlite3.connect(dbs[0]) as conn:
        counts = dict(conn.execute("SELECT kind, records FROM decode_count"))
        assert counts["api_event"] == sum(2 if a.as_events else 1 for a in prof.apis)
        assert conn.execute("SELECT count(*) FROM source_file WHERE kind = 'api_event'").fetchone()[0] == 3
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        assert meta["complete"] == "1" and meta["prof_role"] == "host" and meta["layout"] == "PROF"
    out = summary(prof_dir)
    assert len(out["task_time"]) == len(prof.tasks)
    assert sum(int(r["Count"]) for r in out["api_statistic"]) == len(prof.apis)   # nothing lost at slice cuts
    mtime = dbs[1].stat().st_mtime_ns
    summary(prof_dir)
    assert dbs[1].stat().st_mtime_ns == mtime                  # fresh: not rebuilt
    hwts = sorted((prof_dir / "device_0" / "data").glob("hwts.data.0.slice_*"))[-1]
    hwts.write_bytes(hwts.read_bytes()[:-64])                  # lose the last record
    out = summary(prof_dir)
    assert dbs[1].stat().st_mtime_ns != mtime
    assert len(out["task_time"]) == len(prof.tasks) - 1
    assert any("never ended" in m for m in notices(prof_dir / "device_0"))


def test_bad_records_skipped_not_fatal(tmp_path):
    prof = pg.build(MULTI)
    prof_dir = pg.write_prof(tmp_path, MULTI)
    api = prof_dir / "host" / "data" / "unaging.api_event.data.slice_0"
    data = bytearray(api.read_bytes())
    data[200:202] = b"\0\0"                                    # sixth record: bad magic
    api.write_bytes(bytes(data) + b"\x01\x02\x03")             # and a partial record at the tail
    out = summary(prof_dir)
    assert sum(int(r["Count"]) for r in out["api_statistic"]) == len(prof.apis) - 1
    messages = notices(prof_dir / "host")
    assert any("1 api_event record(s) skipped (bad magic)" in m for m in messages)
    assert any("3 bytes of api_event data lost" in m for m in messages)
    assert len(out["task_time"]) == len(prof.tasks)


@pytest.mark.parametrize("whole_chunk", [True, False])
def test_api_calls_ending_before_they_begin_are_skipped_and_said(tmp_path, whole_chunk, msprof_cli):
    """An API call whose end comes before its begin (damage) cannot be real: it is skipped and counted with the
    file and offset, as a JOB's ACL call is (issue 35 item 5: api_statistic, show and compare printed
    ``KernelLaunch … -74.871``, silently) — in a chunk of calls only (decoded whole) and in one holding an event
    (decoded record by record)."""
    desc = dict(MULTI, model_as_events=not whole_chunk)
    clean = summary(pg.write_prof(tmp_path / "clean", desc))["api_statistic"]
    prof_dir = pg.write_prof(tmp_path / "damaged", desc)
    path = prof_dir / "host" / "data" / "unaging.api_event.data.slice_0"
    data = bytearray(path.read_bytes())
    index = next(i for i in range(len(data) // 40) if struct.unpack_from("<q", data, i * 40 + 24)[0] != -1)
    begin = struct.unpack_from("<q", data, index * 40 + 16)[0]
    struct.pack_into("<q", data, index * 40 + 24, begin - 74871)
    path.write_bytes(bytes(data))
    proc = msprof_cli("export", "summary", "-dir", prof_dir)
    assert proc.returncode == 0, proc.stderr
    assert (f"{path.name} offset {index * 40}: 1 api_event record(s) skipped (time stamp of 2^63 or more, or an end "
            "before its start)") in proc.stderr
    rows = read_csv(prof_dir / "device_0" / "summary" / "api_statistic.csv")
    assert sum(int(r["Count"]) for r in rows) == sum(int(r["Count"]) for r in clean) - 1
    values = [float(r[c]) for r in rows for c in ("Time(us)", "Avg(us)", "Min(us)", "Max(us)", "Variance")]
    assert values and min(values) >= 0
    shown = msprof_cli("show", "-dir", prof_dir, "--format", "json")
    assert shown.returncode == 0 and "-74.871" not in shown.stdout


def test_api_calls_are_counted_at_import_in_bounded_groups(tmp_path, monkeypatch):
    """The import counts the API calls (not the events) by (level, key, duration) as it decodes them, whole
    chunks and record by record (a chunk holding events), holding at most FLUSH groups (a group then has
    several rows): the counts add up to SQL's GROUP BY of the calls — keyed by struct type at the levels named
    by it, by item id at the others — and api_statistic is the generator's truth."""
    from msprof.decode import slices
    from msprof.layouts.prof import host_decoders

    monkeypatch.setattr(host_decoders.ApiCalls, "FLUSH", 2)
    monkeypatch.setattr(slices, "CHUNK_BYTES", 400)            # ten records a chunk
    desc = dict(MULTI, iterations=4, model_as_events=True)
    prof = pg.build(desc)
    out = summary(pg.write_prof(tmp_path / "truth", desc))
    assert_rows_equal("api_statistic", out["api_statistic"], expected_api_statistic(prof))
    # calls of levels named by their item (an aging stream of its own): aicpu items 7, 8, 7 and a pta one
    extra = [(6000, 3, 7, 5, 25), (6000, 3, 8, 30, 50), (25000, 3, 9, 60, 61), (6000, 4, 7, 70, 90)]
    prof_dir = pg.write_prof(tmp_path / "levels", desc)
    (prof_dir / "host" / "data" / "aging.api_event.data.slice_0").write_bytes(b"".join(
        struct.pack("<HHIIIQQQ", 0x5A5A, level, struct_type, 1001, 0, 10 ** 12 + begin, 10 ** 12 + end, item)
        for level, struct_type, item, begin, end in extra))
    (db,) = [d for d in api.import_collection(prof_dir) if d.parent.parent.name == "host"]
    with sqlite3.connect(db) as conn:
        counted = conn.execute("SELECT level, k, d, sum(n) FROM api_duration GROUP BY level, k, d"
                               " ORDER BY level, k, d").fetchall()
        assert conn.execute("SELECT count(*) FROM api_duration").fetchone()[0] > len(counted)   # flushed
        grouped = conn.execute(
            "SELECT level, CASE WHEN level IN (20000, 15000, 10000, 5000) THEN struct_type ELSE item_id END AS k,"
            " [end] - begin AS d, count(*) FROM api WHERE from_events = 0 GROUP BY level, k, d"
            " ORDER BY level, k, d").fetchall()
        events = conn.execute("SELECT count(*) FROM api WHERE from_events = 1").fetchone()[0]    # not counted
    assert counted == grouped
    assert events == sum(a.as_events for a in prof.apis) == 8
    assert sum(n for *_key, n in counted) == len(prof.apis) - events + len(extra)
    assert [row for row in counted if row[0] in (6000, 25000)] == [(6000, 7, 20, 2), (6000, 8, 20, 1),
                                                                   (25000, 9, 1, 1)]


def test_device_without_host_and_missing_pmu(tmp_path):
    desc = dict(MULTI, pmu="PipeUtilization")
    prof = pg.build(desc)
    prof_dir = pg.write_prof(tmp_path, desc)
    import shutil

    shutil.rmtree(prof_dir / "host")
    for f in (prof_dir / "device_0" / "data").glob("aicore.data*"):
        f.unlink()
    out = summary(prof_dir)
    assert "api_statistic" not in out
    # as the reference: no launch names a task, so op_summary (the tasks of the GE task list) has no row;
    # task_time has every task, named by its device type ("Other" on chip v2) and start
    assert out["op_summary"] == [] and out["op_statistic"] == []
    assert [(r["kernel_name"], r["kernel_type"], r["task_start(us)"]) for r in out["task_time"]] == [
        ("N/A", "Other", r["task_start(us)"]) for r in expected_task_time(prof)]


def test_stars_orphans_dropped(tmp_path):
    desc = dict(MULTI, platform_version="5")
    prof = pg.build(desc)
    prof_dir = pg.write_prof(tmp_path, desc)
    path = prof_dir / "device_0" / "data" / "stars_soc.data.0.slice_0"
    data = path.read_bytes()
    path.write_bytes(data[64:])                               # the first start is gone
    out = summary(prof_dir)
    assert len(out["task_time"]) == len(prof.tasks) - 1
    # the message names the log to look for: its stream, task and counter (the logs are paired after the load)
    _head, _magic, stream, task, _start = struct.unpack_from("<4Hq", data, 0)
    end = next(syscnt for head, _m, s, t, syscnt in struct.iter_unpack("<4Hq48x", data)
               if head & 0x3F == 1 and (s, t) == (stream, task))
    assert f"stars_soc: 1 task end(s) without a start dropped (no start time invented; the first: stream " \
           f"{stream}, task {task}, counter {end})" in notices(prof_dir / "device_0")
    # and a start whose end is gone
    path.write_bytes(data[:-64])
    _head, _magic, stream, task, _end = struct.unpack_from("<4Hq", data, len(data) - 64)
    start = max(syscnt for head, _m, s, t, syscnt in struct.iter_unpack("<4Hq48x", data)
                if head & 0x3F == 0 and (s, t) == (stream, task))
    out = summary(prof_dir)
    assert len(out["task_time"]) == len(prof.tasks) - 1
    assert f"stars_soc: 1 task start(s) never ended dropped (no end time invented; the first: stream " \
           f"{stream}, task {task}, counter {start})" in notices(prof_dir / "device_0")


def test_stars_unpaired_logs_named_by_the_first_in_counter_order():
    """Of the starts never ended — replaced by a later start of their task, or left open at the end — the
    warning names the one of the lowest counter (it named the first replacement it met)."""
    from msprof.layouts.prof.pairs import pair_stars
    from msprof.store import Notices

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE stars_log (seq INTEGER PRIMARY KEY, stream_id, task_id, sqe_type, log_type, syscnt)")
    conn.execute("CREATE TABLE task (seq INTEGER PRIMARY KEY, stream_id, task_id, task_type, start_syscnt,"
                 " end_syscnt, exec_n)")
    logs = [(3, 1, 0, 10), (3, 2, 0, 20), (3, 2, 0, 30), (3, 2, 1, 35), (3, 1, 0, 40), (3, 1, 1, 45),
            (4, 9, 1, 50), (4, 9, 1, 60), (5, 5, 0, 70)]
    conn.executemany("INSERT INTO stars_log (stream_id, task_id, sqe_type, log_type, syscnt) VALUES (?, ?, 0, ?, ?)",
                     logs)
    notices = Notices(echo=False)
    pair_stars(conn, notices)
    assert sorted(conn.execute("SELECT stream_id, task_id, start_syscnt, end_syscnt FROM task")) == [
        (3, 1, 40, 45), (3, 2, 30, 35)]
    assert [message for _level, message in notices.items] == [
        "stars_soc: 2 task end(s) without a start dropped (no start time invented; the first: stream 4, task 9,"
        " counter 50)",
        "stars_soc: 3 task start(s) never ended dropped (no end time invented; the first: stream 3, task 1,"
        " counter 10)"]


def test_missing_start_info_keeps_monotonic_times(tmp_path):
    """Deliberate difference: the reference stops without start_info; msprof warns and uses offset 0."""
    prof = pg.build(MULTI)
    prof_dir = pg.write_prof(tmp_path, MULTI)
    (prof_dir / "host" / "start_info").unlink()
    (prof_dir / "device_0" / "start_info.0").unlink()
    out = summary(prof_dir)
    first = min(prof.tasks, key=lambda x: x.start_ns)
    assert out["task_time"][0]["task_start(us)"] == "%.3f" % (first.start_ns / 1000)
    assert len(out["op_summary"]) == len(prof.tasks)
    assert any("no start_info" in m for m in notices(prof_dir / "device_0"))


# ---------------------------------------------------------------------------------------------- selection
def test_model_iteration_selection_and_query(tmp_path, capsys):
    desc = dict(MULTI, iterations=2)
    prof_dir = pg.write_prof(tmp_path, desc)
    api.import_collection(prof_dir)
    api.query(prof_dir)
    text = capsys.readouterr().out
    assert "resnet50" in text and "1-4" in text and "api_event" in text
    out = summary(prof_dir, selection=Selection(1, 2))
    picked = read_csv(prof_dir / "device_0" / "summary" / "op_summary_model1_iter2.csv")
    assert picked and all(r["Model ID"] == "1" for r in picked)
    # the whole run's tables are not written under a selection's name (an api_statistic_model1_iter2 held every
    # call of the run: found by a newcomer's trial)
    assert sorted(out) == ["op_statistic_model1_iter2", "op_summary_model1_iter2"]
    # iteration 2 of model 1 = the second model execution in time order: thread 2002's first
    assert {r["Op Name"] for r in picked} == {"add1", "conv2", "relu2"}
    with pytest.raises(UsageError):
        api.export_summary(prof_dir, "csv", selection=Selection(9))
    with pytest.raises(UsageError):
        api.export_summary(prof_dir, "csv", selection=Selection(1, 99))
    assert out  # the unfiltered files are still there
    # the selected timeline names its model in otherData, as a JOB's does (it was null: a newcomer's trial)
    [timeline] = api.export_timeline(prof_dir, Selection(1, 2))
    other = json.loads(timeline.read_text())["otherData"]
    assert timeline.name == "msprof_model1_iter2.json"
    assert (other["model"], other["iteration"]) == ({"modelId": 1, "modelName": "resnet50", "batchNum": None}, 2)


def test_json_format_and_show(tmp_path, capsys):
    prof_dir = pg.write_prof(tmp_path, MULTI)
    written = api.export_summary(prof_dir, "json")
    assert sorted(p.name for p in written) == ["api_statistic.json", "op_statistic.json", "op_summary.json",
                                               "task_time.json"]
    rows = json.loads((prof_dir / "device_0" / "summary" / "api_statistic.json").read_text())
    # (the device number is a number in JSON, as the counts are)
    assert rows == [dict(r, Count=int(r["Count"]), Device_id=0) for r in expected_api_statistic(pg.build(MULTI))]
    for name in ("op_summary", "op_statistic", "task_time"):
        table = json.loads((prof_dir / "device_0" / "summary" / f"{name}.json").read_text())
        assert table and {row["Device_id"] for row in table} == {0}, name
    capsys.readouterr()
    api.show(prof_dir, view=View(top=2))
    text = capsys.readouterr().out
    assert "Op statistic (device 0)" in text and "API statistic (host)" in text
    # the same tables for scripts: op statistic rows by total time, top 2, keys snake_case, numbers
    api.show(prof_dir, view=View(fmt="json", top=2))
    doc = json.loads(capsys.readouterr().out)
    unit = doc[f"{prof_dir.name}/device_0"]
    assert unit["layout"] == "PROF" and list(unit["tables"]) == ["op_summary", "op_statistic", "api_statistic"]
    truth = expected_op_statistic(pg.build(MULTI))
    statistic = unit["tables"]["op_statistic"]
    assert statistic["row_count"] == len(truth)
    assert [(r["op_type"], r["count"], r["total_time_us"]) for r in statistic["rows"]] == [
        (t["OP Type"], int(t["Count"]), t["Total Time(us)"]) for t in truth[:2]]
    assert unit["tables"]["op_summary"]["row_count"] == len(pg.build(MULTI).tasks)
    assert statistic["context"] == {"device_id": 0, "model_id": None, "iteration_id": None}
    assert unit["path"] == str(prof_dir / "device_0")


def test_show_has_a_worker_make_op_statistic_for_many_tasks(tmp_path, capsys, monkeypatch):
    """From SHOW_PARALLEL_MIN_TASKS tasks (and with a second core) a worker process makes op_statistic's rows
    while show picks op_summary's: the same tables as made in one process, with a selection too."""
    import msprof.layouts.prof as prof_layout
    from msprof import workers

    prof_dir = pg.write_prof(tmp_path, MULTI)
    made, started = [], []

    class Counted(workers.Later):
        def __init__(self, *args):
            made.append(args[1:])
            super().__init__(*args)

        def start(self):
            if self.future is None:
                started.append(self.call[1:])
            super().start()

    def shown(threshold, selection=Selection()):
        monkeypatch.setattr(prof_layout, "SHOW_PARALLEL_MIN_TASKS", threshold)
        api.show(prof_dir, selection, view=View(fmt="json", top=0))
        return json.loads(capsys.readouterr().out)

    monkeypatch.setattr(prof_layout, "Later", Counted)
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    alone = shown(10 ** 9)
    assert made == []
    assert shown(1) == alone
    selection = Selection(model_id=1, iteration_id=1)
    assert made == [(ProfReport.op_statistic_rows, (Selection(),))]
    assert shown(1, selection) == shown(10 ** 9, selection)
    assert made[1:] == started[1:] == [(ProfReport.op_statistic_rows, (selection,))]
    statistic = alone[f"{prof_dir.name}/device_0"]["tables"]["op_statistic"]
    assert statistic["row_count"] == len(expected_op_statistic(pg.build(MULTI))) > 0
    # a table left out (--table) is never made: its worker is not started
    monkeypatch.setattr(prof_layout, "SHOW_PARALLEL_MIN_TASKS", 1)
    api.show(prof_dir, view=View(fmt="json", tables=("op_summary",)))
    assert list(json.loads(capsys.readouterr().out)[f"{prof_dir.name}/device_0"]["tables"]) == ["op_summary"]
    assert len(made) == 3 and len(started) == 2


def test_a_worker_whose_value_is_not_read_is_stopped_with_its_report(tmp_path, monkeypatch):
    """show's worker (workers.Later) must not outlive its report: on an error, an interrupt or a broken pipe
    the report is closed with its value unread, and the worker is stopped then (the interpreter's exit would
    otherwise wait for it, and a second Ctrl-C there hung)."""
    from msprof import workers
    from msprof.layouts import find_units

    prof_dir = pg.write_prof(tmp_path, MULTI)
    api.import_collection(prof_dir)
    [unit] = [u for u in find_units(prof_dir) if u.path.name == "device_0"]
    report = unit.open()
    later = workers.Later(report, _slow_rows, (Selection(),))
    later.start()
    [process] = later.pool._processes.values()
    assert process.is_alive()
    report.close()
    process.join(30)
    assert not process.is_alive() and later.pool is None


def _slow_rows(report, selection):
    """A report method whose value takes longer than any test waits (picklable: a worker runs it)."""
    import time

    time.sleep(600)


# ---------------------------------------------------------------------------------------------- timeline
@pytest.mark.parametrize("platform", ["1", "5"])
def test_timeline_is_valid_with_flows(tmp_path, platform):
    desc = dict(MULTI, platform_version=platform, model_as_events=True)
    prof = pg.build(desc)
    prof_dir = pg.write_prof(tmp_path, desc)
    [path] = api.export_timeline(prof_dir)
    assert path.name == "msprof.json"
    assert check_trace(path) == []
    events = json.loads(path.read_text())["traceEvents"]
    tasks = [e for e in events if e["ph"] == "X" and e["pid"] == TASK_PID_BASE]
    flows = [e for e in events if e["ph"] == "s"]
    apis = [e for e in events if e["ph"] == "X" and e["pid"] == prof.desc["pid"]]
    assert len(tasks) == len(flows) == len(prof.tasks)
    assert len(apis) == len(prof.apis)
    first = min(tasks, key=lambda e: e["ts"])
    t0 = prof.tasks[0]
    assert first["name"] == t0.op_name
    assert first["ts"] == pytest.approx((t0.start_ns - prof.host_mono_ns) / 1000)
    assert first["dur"] == pytest.approx(t0.dur_ns / 1000)


def test_timeline_times_are_exact_on_both_sides_of_the_collection_start(tmp_path):
    """Times are whole ns printed as µs with three decimals, negative ones (before the collection start, the
    origin) included: every task and host call, and every flow's two ends, read back as the exact ns / 1000."""
    prof = pg.build(MULTI)
    starts = sorted(t.start_ns for t in prof.tasks)
    shift_us = (starts[len(starts) // 2] - prof.host_mono_ns) // 1000        # the origin among the tasks
    desc = dict(MULTI, collection_start_us=shift_us, model_as_events=True)
    prof = pg.build(desc)
    origin = prof.host_mono_ns + shift_us * 1000
    [path] = api.export_timeline(pg.write_prof(tmp_path, desc))
    assert check_trace(path) == []
    events = json.loads(path.read_text())["traceEvents"]
    tasks = sorted((e["ts"], e["dur"]) for e in events if e["ph"] == "X" and e["pid"] == TASK_PID_BASE)
    assert tasks == sorted(((t.start_ns - origin) / 1000, t.dur_ns / 1000) for t in prof.tasks)
    assert tasks[0][0] < 0 < tasks[-1][0]
    calls = sorted((e["ts"], e["dur"]) for e in events if e["ph"] == "X" and e["pid"] == prof.desc["pid"])
    assert calls == sorted(((a.begin - origin) / 1000, (a.end - a.begin) / 1000) for a in prof.apis)
    assert calls[0][0] < 0 < calls[-1][0]
    ends = {e["id"]: e["ts"] for e in events if e["ph"] == "f"}
    assert sorted(ends.values()) == [ts for ts, _dur in tasks]
    launches = sorted(e["ts"] for e in events if e["ph"] == "s")
    assert launches == sorted((t.timestamp - origin) / 1000 for t in prof.tracks) and launches[0] < 0


def _reference_epoch_us(ns: int, begin_us: str, raw_ns: str) -> Decimal:
    """A host-monotonic ns value in µs since the epoch as the reference prints it (docs/prof-format.md §4): its
    offset is a float (collectionTimeBegin less clockMonotonicRaw in µs), whose step at 1.7e15 is 0.25 µs."""
    offset = float(begin_us) - float(raw_ns) / 1000
    return (Decimal(ns) / 1000 + Decimal(repr(offset))).quantize(Decimal("0.001"))


@pytest.mark.parametrize("seed", [3, 5, 8])
def test_timeline_times_are_op_summary_times(tmp_path, seed):
    """Issue 36: the timeline's origin is collectionTimeBegin, and a time on it is the time op_summary prints
    (the reference's offset, a float whose step is 0.25 µs at 1.7e15, not the exact one): every device task
    starts at its op_summary start, and every host call at the reference's time of its api_event record (a
    host without a CPU frequency records ns). They were 0.075 µs early (seed 3), 0.101 (seed 5), 0.064 (seed 8)."""
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", str(seed), "--ops", "8", "--iters", "2", "--platform",
                                                 "5", "--mode", "launch"]))
    rows = summary(prof_dir)["op_summary"]
    [path] = api.export_timeline(prof_dir)
    trace = json.loads(path.read_text())
    origin = Decimal(trace["otherData"]["collectionTimeBegin"])
    events = trace["traceEvents"]
    tasks = sorted(((e["args"]["Stream ID"], e["args"]["Task ID"]), origin + Decimal(repr(e["ts"])))
                   for e in events if e["ph"] == "X" and e["pid"] == TASK_PID_BASE)
    starts = sorted(((int(r["Stream ID"]), int(r["Task ID"])), Decimal(r["Task Start Time(us)"])) for r in rows)
    assert len(rows) == 32 and tasks == starts
    start_info = json.loads((prof_dir / "host" / "start_info").read_text())
    begin_us, raw_ns = start_info["collectionTimeBegin"], start_info["clockMonotonicRaw"]
    data = b"".join(p.read_bytes() for p in sorted((prof_dir / "host" / "data").glob("*api_event*")))
    records = [struct.unpack_from("<HHIIIQQQ", data, k) for k in range(0, len(data), 40)]
    # API records begin at their begin, an event pair's call at its first event
    apis = Counter(_reference_epoch_us(begin, begin_us, raw_ns) for *_h, begin, end, _i in records if end != EVENT_END)
    moments = {_reference_epoch_us(begin, begin_us, raw_ns) for *_head, begin, _end, _item in records}
    host_pid = int(json.loads((prof_dir / "host" / "info.json").read_text())["pid"])
    calls = Counter(origin + Decimal(repr(e["ts"])) for e in events if e["ph"] == "X" and e["pid"] == host_pid)
    assert not apis - calls and set(calls) <= moments and sum(calls.values()) > sum(apis.values())


def test_timeline_host_ticks_count_from_the_sync_counter(tmp_path):
    """A host recording CPU ticks (CPU[0].Frequency set): a call's time is (ticks − host_start.log's cntvct) /
    frequency + its clock_monotonic_raw with the cntvct_diff correction, in the reference's float offset
    (docs/prof-format.md §4). The timeline took ticks / frequency alone, 2.9 s away on this data. The rounding
    to a ns may differ from the reference's (half even) at an exact half, hence the 1 ns."""
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "24", "--ops", "6", "--iters", "2", "--host-freq", "100",
                                                 "--cntvct-diff", "12345", "--platform", "4"]))
    [path] = api.export_timeline(prof_dir)
    trace = json.loads(path.read_text())
    origin = Decimal(trace["otherData"]["collectionTimeBegin"])
    start_info = json.loads((prof_dir / "host" / "start_info").read_text())
    sync = dict(line.split(": ") for line in (prof_dir / "host" / "host_start.log").read_text().split("\n")[1:]
                if ": " in line)
    hz = float(json.loads((prof_dir / "host" / "info.json").read_text())["CPU"][0]["Frequency"]) * 1e6
    mono = int(sync["clock_monotonic_raw"]) + round(int(sync["cntvct_diff"]) * 1e9 / hz)

    def expected(ticks):
        return _reference_epoch_us(float(ticks - int(sync["cntvct"])) / hz * 1e9 + mono,
                                   start_info["collectionTimeBegin"], start_info["clockMonotonicRaw"])

    data = b"".join(p.read_bytes() for p in sorted((prof_dir / "host" / "data").glob("*api_event*")))
    records = [struct.unpack_from("<HHIIIQQQ", data, k) for k in range(0, len(data), 40)]
    apis = sorted(expected(begin) for *_h, begin, end, _i in records if end != EVENT_END)
    host_pid = int(json.loads((prof_dir / "host" / "info.json").read_text())["pid"])
    calls = sorted(origin + Decimal(repr(e["ts"])) for e in trace["traceEvents"]
                   if e["ph"] == "X" and e["pid"] == host_pid)
    near = [min(abs(c - a) for c in calls) for a in apis]
    assert len(apis) == 69 and max(near) <= Decimal("0.001"), max(near)
    tracks = b"".join(p.read_bytes() for p in sorted((prof_dir / "host" / "data").glob("*task_track*")))
    launches = sorted(expected(struct.unpack_from("<Q", tracks, k + 16)[0]) for k in range(0, len(tracks), 64))
    flows = sorted(origin + Decimal(repr(e["ts"])) for e in trace["traceEvents"] if e["ph"] == "s")
    assert len(flows) == len(launches) and all(abs(f - t) <= Decimal("0.001") for f, t in zip(flows, launches))
    # a selection's timeline has the host calls around its tasks and their launches' node calls (its span was
    # taken for ticks / frequency too: every call after the first launch)
    [selected] = api.export_timeline(prof_dir, Selection(1, 1))
    events = json.loads(selected.read_text())["traceEvents"]
    tasks = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["ph"] == "X" and e["pid"] == TASK_PID_BASE]
    nodes = [(e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == "launch"]
    begins = [min(b for b, end in nodes if b <= e["ts"] <= end) for e in events if e["ph"] == "s"]
    lo, hi = min(begins + [b for b, _e in tasks]), max(end for _b, end in tasks)
    around = sorted((e["ts"], e["name"]) for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == host_pid
                    and e["ts"] + e["dur"] >= lo and e["ts"] <= hi)
    assert len(tasks) == 6 and sorted((e["ts"], e["name"]) for e in events
                                      if e["ph"] == "X" and e["pid"] == host_pid) == around


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_exit_codes(tmp_path, msprof_cli):
    prof_dir = pg.write_prof(tmp_path, MULTI)
    ok = msprof_cli("export", "summary", "-dir", prof_dir)
    assert ok.returncode == 0, ok.stderr
    assert (prof_dir / "device_0" / "summary" / "op_statistic.csv").is_file()
    # a fresh PROF_: the device's unit imports its host's data and its own
    assert f"{prof_dir.name}/device_0: importing its host data (no database yet)" in ok.stderr
    assert f"{prof_dir.name}/device_0: importing (no database yet)" in ok.stderr
    empty = tmp_path / "nothing"
    empty.mkdir()
    res = msprof_cli("import", "-dir", empty)
    assert res.returncode == 2 and "no info.json" in res.stderr
    info = prof_dir / "device_0" / "info.json.0"
    info.write_text("{not json\n")
    res = msprof_cli("export", "summary", "-dir", prof_dir)
    assert res.returncode == 8 and "info.json.0" in res.stderr and "Traceback" not in res.stderr
    info.write_text("{}\n")
    res = msprof_cli("export", "summary", "-dir", prof_dir)
    assert res.returncode == 8 and "hwts_frequency" in res.stderr
    good = pg.write_prof(tmp_path / "b", MULTI)
    shutil.rmtree(good / "host" / "data")               # nothing recorded at all
    res = msprof_cli("import", "-dir", good)
    assert res.returncode == 8 and f"{good / 'host' / 'data'}: raw data directory missing" in res.stderr
    assert "Traceback" not in res.stderr
    good = pg.write_prof(tmp_path / "c", MULTI)
    shutil.rmtree(good / "device_0" / "data")           # a device that recorded nothing: one without tasks
    res = msprof_cli("import", "-dir", good)
    assert res.returncode == 0, res.stderr
    assert f"no device task data (hwts.data / stars_soc.data) in {good / 'device_0' / 'data'}" in res.stderr


def test_show_of_a_table_no_result_dir_has_is_a_usage_error(tmp_path, msprof_cli):
    """--table naming only a JOB's table on PROF data: exit 2, not an empty csv a script takes for success."""
    prof_dir = pg.write_prof(tmp_path, MULTI)
    for fmt in ("csv", "json", "table"):
        res = msprof_cli("show", "-dir", prof_dir, "--table", "acl_statistic", "--format", fmt)
        assert res.returncode == 2, res.stderr
        assert ("--table acl_statistic: no such table in any result directory (their tables: op_summary, "
                "op_statistic, api_statistic)") in res.stderr
        assert "no acl_statistic table here" not in res.stderr       # (the only result dir: said once)
    res = msprof_cli("show", "-dir", prof_dir, "--table", "api_statistic", "--format", "csv")
    assert res.returncode == 0 and res.stdout.startswith("Device_id,Level,API Name")


def test_query_lists_the_models_each_device_ran(tmp_path, msprof_cli):
    """Two models on two devices (the generator puts model k on device k-1): each device lists its own model,
    not every model the host ran; the device is a number in json."""
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "1", "--ops", "6", "--iters", "3", "--devices", "2",
                                                 "--models", "2"]))
    res = msprof_cli("query", "-dir", prof_dir, "--table", "collection", "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    listed = {label.split("/")[-1]: [(r["device"], r["model_id"], r["iterations"], r["iteration_ids"])
                                     for r in unit["tables"]["collection"]["rows"]] for label, unit in doc.items()}
    assert listed == {"device_0": [(0, 1, 3, [1, 2, 3])], "device_1": [(1, 2, 3, [1, 2, 3])]}   # ids: a list


@pytest.mark.parametrize("shape", [
    ["--mode", "static", "--models", "2", "--threads", "2", "--start-offset-ns", "8000000"],
    ["--mode", "launch", "--models", "3", "--threads", "2", "--streams", "2", "--singleop", "3"],
])
def test_the_selections_together_hold_each_iterated_task_once(tmp_path, shape):
    """A selection's tasks are filtered before their PMU join and columns are made (``_tasks(within=…)``),
    not only after: every (model, iteration) selection together still gives exactly the whole run's rows of
    a known model, each once (all columns but the wait, which is from the row before in the table)."""
    from collections import Counter

    from msprof.layouts import find_units

    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "7", "--ops", "12", "--iters", "3"] + shape))
    api.import_collection(prof_dir)
    [unit] = find_units(prof_dir, None)
    with unit.open() as report:
        whole = report.op_summary(Selection())
        names = [c.name for c in whole.columns]
        wait, model = names.index("Task Wait Time(us)"), names.index("Model ID")
        drop = lambda row: row[:wait] + row[wait + 1:]      # noqa: E731
        expected = Counter(drop(r) for r in whole.rows() if r[model] != 4294967295)
        iterations = report.check(Selection())
        assert len(iterations) >= 6
        picked, kept = Counter(), 0
        for it in iterations:
            # (an iteration whose tasks all ended before the collection began has none in op_summary)
            table = report.op_summary(Selection(it.model_id, it.index_id))
            # (an iteration's table also names it: Model Name after Device_id, Infer ID after Stream ID)
            assert [c.name for c in table.columns][1:6:4] == ["Model Name", "Infer ID"]
            full = list(table.rows())
            assert {r[5] for r in full} <= {it.index_id}
            rows = [r[:1] + r[2:5] + r[6:] for r in full]
            assert {r[model] for r in rows} <= {it.model_id}
            picked.update(drop(r) for r in rows)
            kept += bool(rows)
        assert picked == expected and kept >= 4
        # the idle pass (advise's) gives the same busy time per iteration as the pass without idle (compare's)
        facts = unit.layout.facts(report)
        plain = facts.model_iterations()
        idle = {}
        for name, _index, busy, *_rest in facts._idle_per_iteration(Selection()):
            idle.setdefault(name, []).append(busy)
        assert idle == plain and sum(map(len, plain.values())) >= 4


def test_a_selection_no_device_has_names_each_device_once(tmp_path, msprof_cli):
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "1", "--ops", "4", "--iters", "2", "--devices", "2",
                                                 "--models", "2"]))
    res = msprof_cli("show", "-dir", prof_dir, "--model-id", "9", "--iteration-id", "1")
    assert res.returncode == 2
    errors = [line for line in res.stderr.splitlines() if line.startswith("msprof: error:")]
    # (each device names the models it ran: device_0 model 1, device_1 model 2)
    assert errors[:2] == [f"msprof: error: {prof_dir.name}/device_{d}: no model 9 recorded (models: {d + 1}; msprof "
                          "query lists their iterations)" for d in (0, 1)]
    # a model the other device ran is not this one's to select: named, not written as empty files (found by a
    # newcomer's trial)
    res = msprof_cli("export", "summary", "-dir", prof_dir, "--model-id", "2", "--iteration-id", "1")
    assert res.returncode == 2, res.stderr
    assert f"{prof_dir.name}/device_0: no model 2 recorded (models: 1;" in res.stderr
    assert (prof_dir / "device_1" / "summary" / "op_summary_model2_iter1.csv").is_file()
    assert not (prof_dir / "device_0" / "summary" / "op_summary_model2_iter1.csv").exists()
    assert errors[2] == (f"msprof: error: 2 of 2 result directories failed (see above): {prof_dir / 'device_0'}, "
                         f"{prof_dir / 'device_1'}")            # (no "others were done": there are none)


def test_the_next_steps_after_a_selected_export_keep_the_selection(tmp_path, msprof_cli):
    prof_dir = pg.write_prof(tmp_path, MULTI)
    res = msprof_cli("export", "summary", "-dir", prof_dir, "--model-id", "1", "--iteration-id", "2")
    assert res.returncode == 0, res.stderr
    assert f"next: msprof show -dir {prof_dir} --model-id 1 --iteration-id 2   (the tables" in res.stderr
    assert f"msprof advise -dir {prof_dir} --model-id 1 --iteration-id 2   (where the time goes" in res.stderr


def test_the_next_steps_of_a_two_device_collection_can_be_run_as_given(tmp_path, msprof_cli):
    """advise reads one result directory: after exporting a two-device PROF_, the suggested advise names a
    device directory, and runs (found by a newcomer's trial: it named the PROF_ directory, a usage error)."""
    import shlex

    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "1", "--ops", "4", "--iters", "2", "--devices", "2"]))
    res = msprof_cli("export", "summary", "-dir", prof_dir)
    assert res.returncode == 0, res.stderr
    [advise] = [line.split("msprof ", 1)[1].split("   (")[0] for line in res.stderr.splitlines()
                if "msprof advise" in line]
    assert advise == f"advise -dir {prof_dir / 'device_0'}"
    assert ("(where the time goes and what to do about it; one result directory at a time, 2 here)"
            in res.stderr)
    assert msprof_cli(*shlex.split(advise)).returncode == 0


def test_tensor_descriptions_are_held_in_bounded_caches(monkeypatch):
    """With dynamic shapes every launch may bring a new description: the caches stay at HELD entries (a
    description met again after they were emptied gets a new id, with the same texts)."""
    from msprof.layouts.prof.tensors import RECORD_BODY, TensorContents

    monkeypatch.setattr(TensorContents, "HELD", 4)
    contents = TensorContents()
    bodies = [RECORD_BODY.pack(1, *([0, 2, 1, k + 1] + [0] * 51)) for k in range(10)]   # input ND FLOAT16 [k+1]
    ids = [contents[(contents.sides_of(body),)] for body in bodies + bodies]
    assert len(contents) <= 4 and len(contents.sides) <= 4
    texts = {row[0]: row[1:] for row in contents.take_new().rows}
    assert [texts[i] for i in ids] == [('"%d"' % (k + 1), "FLOAT16", "ND", "N/A", "N/A", "N/A")
                                       for k in range(10)] * 2


def test_pmu_counts_of_2_63_or_more_are_damaged_not_negative(tmp_path):
    """Cycles and counters are unsigned 64-bit; one of 2^63 or more (read signed, it would print negative
    ratios and times) marks its record damaged: the task's PMU columns are N/A, the other tasks' are intact
    (the executions stay paired), and the import says so."""
    desc = {"pmu": "PipeUtilization", "iterations": 1, "threads": [{"ops": [
        {"name": "bad", "type": "Add", "total_cycles": 2 ** 64 - 1},
        {"name": "good", "type": "Add", "total_cycles": 100, "pmu": [10, 20, 30, 40, 50, 60, 70, 80]}]}]}
    prof_dir = pg.write_prof(tmp_path, desc)
    bad, good = summary(prof_dir)["op_summary"]
    assert bad["total_cycles"] == bad["vec_ratio"] == bad["aicore_time(us)"] == "N/A"
    assert good["total_cycles"] == "100" and good["vec_ratio"] == "0.1" and good["mac_ratio"] == "0.2"
    assert ("aicore.data.0.slice_0 offset 0: 1 aicore PMU record(s) with a cycle count or counter of 2^63 or more"
            " (damaged): their tasks' PMU columns are N/A") in notices(prof_dir / "device_0")


@pytest.mark.parametrize("platform, read", [("5", False), ("11", False), ("3", True)])
def test_aicore_data_is_read_only_on_chips_whose_pmu_it_holds(tmp_path, platform, read):
    """A STARS chip keeps its PMU in ffts_profile.data; the reference reads no aicore.data there (op_summary
    without PMU columns), and msprof neither, saying so. On an HWTS chip the same file gives the columns."""
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "5", "--ops", "4", "--iters", "2", "--models", "1",
                                                 "--platform", platform]))
    assert list((prof_dir / "device_0" / "data").glob("aicore.data.*"))
    tables = summary(prof_dir)
    said = ("aicore.data of platform %s (a STARS chip, whose PMU is in ffts_profile.data) not read, as the "
            "reference does not read it: op_summary has no PMU columns" % platform)
    assert (said in notices(prof_dir / "device_0")) is not read
    if platform == "11":    # (the generator writes hwts.data there, which the reference does not read either)
        assert "op_summary" not in tables and ("hwts.data of platform 11 not read, as the reference does not read it"
                                               " on this chip (its task log is elsewhere)") in notices(prof_dir / "device_0")
        return
    rows = tables["op_summary"]
    assert len(rows) == 8
    assert ("total_cycles" in rows[0]) is read


@pytest.mark.parametrize("empty", ["empty file", "no file", "no data directory"])
def test_a_device_that_recorded_nothing_is_a_device_without_tasks(tmp_path, empty):
    """A run on two devices where the app used one: the idle device's data/ has nothing in it. It is no error
    (the reference takes it as a device too): its tables of tasks are skipped, said once, and it gets the
    host's API statistic; its database stays fresh."""
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "8", "--ops", "3", "--iters", "2", "--models", "1",
                                                 "--devices", "2"]))
    idle = prof_dir / "device_1"
    assert [p.stat().st_size for p in (idle / "data").iterdir()] == [0]     # what the generator wrote
    if empty == "no file":
        for path in (idle / "data").iterdir():
            path.unlink()
    elif empty == "no data directory":
        shutil.rmtree(idle / "data")
    api.import_collection(prof_dir)
    messages = notices(idle)
    assert [m for m in messages if "device task data" in m] == [
        f"no device task data (hwts.data / stars_soc.data) in {idle / 'data'}: op_summary, op_statistic and "
        "task_time are skipped"]
    assert not any("aicore.data" in m for m in messages)
    written = api.export_summary(prof_dir, "csv")
    assert sorted(p.name for p in written if p.parent.parent == idle) == ["api_statistic.csv"]
    busy = read_csv(prof_dir / "device_0" / "summary" / "api_statistic.csv")
    assert read_csv(idle / "summary" / "api_statistic.csv") == [dict(row, Device_id="1") for row in busy]
    assert busy and all(row["Device_id"] == "0" for row in busy)
    assert len(read_csv(prof_dir / "device_0" / "summary" / "op_summary.csv")) == 6
    built = (idle / "sqlite" / "msprof.db").stat().st_mtime_ns
    api.export_summary(idle, "csv")                     # fresh: not imported again
    assert (idle / "sqlite" / "msprof.db").stat().st_mtime_ns == built


def test_show_csv_writes_its_rows_as_it_goes(tmp_path, monkeypatch):
    """show --format csv streams a table a batch at a time (held as one text, a million rows took 210 MB)."""
    import csv
    import io

    import click

    from msprof.show import View

    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "3", "--ops", "50", "--iters", "50", "--models", "1",
                                                 "--aicpu-ratio", "0"]))
    api.import_collection(prof_dir)
    stdout = []
    monkeypatch.setattr(click, "echo",
                        lambda text, nl=True, file=None, **kw: stdout.append(text) if file is None else None)
    api.show(prof_dir / "device_0", view=View(fmt="csv", top=0, tables=("op_summary",)))
    rows = list(csv.reader(io.StringIO("".join(stdout))))
    assert len(rows) == 1 + 50 * 50
    assert len(stdout) >= 2500 // 1024
    # the task columns of the exported op_summary, Device_id first (as in op_statistic), and its rows
    api.export_summary(prof_dir / "device_0", fmt="csv")
    with open(prof_dir / "device_0" / "summary" / "op_summary.csv", newline="") as f:
        exported = list(csv.reader(f))
    assert rows[0] == exported[0][:12] and rows[0][:2] == ["Device_id", "Model ID"]
    assert sorted(rows[1:]) == sorted(row[:12] for row in exported[1:])


@pytest.mark.parametrize("platform", ["5", "7"])
def test_a_stars_pmu_file_msprof_cannot_read_yet_is_said(tmp_path, platform):
    """ffts_profile.data is made into op_summary's columns on platform 5 only: the import says so elsewhere."""
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "6", "--ops", "3", "--iters", "1", "--platform", platform,
                                                 "--pmu", "0"]))
    api.import_collection(prof_dir)
    assert not any("ffts_profile" in m for m in notices(prof_dir / "device_0"))
    (prof_dir / "device_0" / "data" / "ffts_profile.data.0.slice_0").write_bytes(bytes(128))
    api.import_collection(prof_dir)
    said = ("ffts_pmu data decoded (msprof query counts them); not made from them yet: op_summary's STARS AI Core "
            "PMU columns") in notices(prof_dir / "device_0")
    assert said == (platform != "5")


def test_a_metric_set_missing_an_event_is_said(tmp_path):
    """sample.json names the Memory set but not all its events: op_summary has the raw counters by event id,
    and the import says why."""
    prof_dir = pg.write_prof(tmp_path, dict(MULTI, pmu="Memory"))
    sample_path = prof_dir / "device_0" / "sample.json"
    sample = json.loads(sample_path.read_text())
    sample["ai_core_profiling_events"] = "0x15,0x16,0x31,0x32,0xf,0x10,0x13"      # no 0x12 (main_mem_read)
    sample_path.write_text(json.dumps(sample))
    out = summary(prof_dir)
    assert list(out["op_summary"][0])[-9:] == ["aicore_time(us)", "total_cycles", "0x15", "0x16", "0x31", "0x32",
                                               "0xf", "0x10", "0x13"]
    assert ("sample.json's ai_core_profiling_events lack 0x12 of the Memory metric set: op_summary has its raw"
            " PMU counters, by event id, instead of the set's columns") in notices(prof_dir / "device_0")


def test_tensor_record_claiming_more_than_five_tensors_is_read_and_said(tmp_path):
    """A tensor_info record has room for five tensors; one claiming seven is damaged: read for its five, and
    said once with the file and offset (the reference refuses the whole file)."""
    desc = {"iterations": 1, "threads": [{"ops": [
        {"name": "a", "type": "Add", "tensors": [[0, 2, 0, [k + 1]] for k in range(5)]}]}]}
    prof_dir = pg.write_prof(tmp_path, desc)
    path = next((prof_dir / "host" / "data").glob("*tensor_info*"))
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 32, 7)
    broken = bytearray(data[:256])
    broken[0] = 0                                     # a record of bad magic before it: the offset is the file's
    path.write_bytes(bytes(broken + data))
    (row,) = summary(prof_dir)["op_summary"]
    assert row["Input Shapes"] == '"1;2;3;4;5"' and row["Output Shapes"] == "N/A"
    assert ("unaging.additional.tensor_info.slice_0 offset 256: 1 tensor_info record(s) claim more than 5 tensors"
            " (damaged): read for the 5 each holds") in notices(prof_dir / "host")


def test_tensor_info_chunks_decoded_whole_give_what_record_by_record_gives():
    """A chunk whose nodes each have one record is decoded at once (its heads by one struct, each record a node
    but the last, which the next chunk may continue); the rows are those of the record-by-record pass: nodes
    of several records, a node continuing over a chunk's end, and a record claiming more than five tensors
    (which sends its chunk record by record) included."""
    from msprof.layouts.prof.host_decoders import TensorInfos
    from msprof.layouts.prof.tensors import TensorContents

    def record(thread, ts, node, tensors, claimed=None):
        words = [w for kind, fmt, dtype, dims in tensors for w in [kind, fmt, dtype] + (dims + [0] * 8)[:8]]
        return struct.pack("<HHIIIqqI55I", 0x5A5A, 10000, 3, thread, 228, ts, node,
                           len(tensors) if claimed is None else claimed, *(words + [0] * (55 - len(words))))

    shapes = [[(0, 2, 1, [k + 1, 8]), (1, 2, 1, [k + 1])] for k in range(7)]
    records = []
    for i in range(300):
        if i % 97 == 5:           # a node of seven tensors: two records of one key
            seven = [(0, 2, 1, [j + 1]) for j in range(7)]
            records += [record(1, 1000 * i, 50 + i % 3, seven[:5]), record(1, 1000 * i, 50 + i % 3, seven[5:])]
        else:
            records.append(record(1 + i % 2, 1000 * i, 50 + i % 3, shapes[i % 7],
                                  claimed=7 if i == 250 else None))
    # nodes whose two records straddle a chunk's end (chunks of 32 records): after a chunk decoded record by
    # record (records 31 and 32) and after one decoded whole (95 and 96)
    records[32] = records[31]
    records[96] = records[95]
    data = b"".join(records)

    class Counted(TensorInfos):
        """Counts the records decoded one by one."""

        one_by_one = 0

        class HEAD:
            size = TensorInfos.HEAD.size

            @staticmethod
            def unpack_from(buffer, offset):
                Counted.one_by_one += 1
                return TensorInfos.HEAD.unpack_from(buffer, offset)

    def rows(chunk_records: int):
        decoder, tally, out = Counted(TensorContents()), Tally(256), []
        size = chunk_records * 256
        for offset in range(0, len(data), size):
            tally.base = offset
            out += decoder.decode(data[offset:offset + size], tally)
        out += decoder.finish(tally)
        return ([row for part in out if part.table == "tensor" for row in part.rows],
                [row for part in out if part.table == "tensor_info" for row in part.rows],
                decoder.overfull, decoder.first_overfull)

    whole = rows(32)
    # one by one: the chunks holding a node of two records (0, 3, 6, 9: 304 records, the last chunk 16), or an
    # overfull record (7), or beginning with the node before them (1, 3); the other four were decoded whole
    assert Counted.one_by_one == 5 * 32 + 16
    one_by_one = rows(1)                                               # (a chunk of one record goes one by one)
    assert whole == one_by_one
    tensors, nodes, overfull, first_overfull = whole
    assert len(nodes) == 300 - 2 and overfull == 1 and first_overfull == (250 + 3) * 256


def with_tensors(desc: dict) -> dict:
    """``desc`` with tensor_info for every op, each op its own (the k-th op's input k×8, its output k)."""
    desc = copy.deepcopy(desc)
    ops = [op for thread in desc["threads"] for op in thread["ops"]]
    for k, op in enumerate(ops, 1):
        op["tensors"] = [[0, 2, 1, [k, 8]], [1, 2, 1, [k]]]
    return desc


@pytest.mark.parametrize("dense", [None, 2])
def test_two_processes_resolve_the_task_track_records_as_one_does(tmp_path, monkeypatch, dense):
    """From SPLIT_TRACK_BYTES a worker resolves the later half of the task_track records into a part database
    that is merged in: the host database holds what one process makes of them — launches in record order, ops
    numbered as first met (some first met in the later half), launch ranks (occ) carried over the halves on
    reused task ids, and a bad record in each half counted in one warning that names the first. ``dense``:
    launches counted in arrays from two task ids a stream on (a long run's streams), not in the dict."""
    from msprof.decode import slices
    from msprof.decode.occurrences import Occurrences
    from msprof.layouts.prof import importer, launches

    if dense:
        monkeypatch.setattr(Occurrences, "DENSE", dense)

    desc = with_tensors(dict(MULTI, iterations=30, task_id_wrap=5))    # (ops carry their tensors' id too)
    prof_dir = pg.write_prof(tmp_path, desc)
    data = prof_dir / "host" / "data"
    (track,) = data.glob("*task_track*")
    records = bytearray(track.read_bytes())
    # at its end, another run's launches: kernels of other names, first met by the worker
    other = pg.write_prof(tmp_path / "other", dict(MULTI, threads=[{"tid": 5, "ops": [
        {"name": "late1", "type": "Mul"}, {"name": "late2", "type": "Sub"}]}], iterations=5))
    records += next((other / "host" / "data").glob("*task_track*")).read_bytes()
    n = len(records) // 64
    for index in (3, n - 4):                       # a bad magic in each half
        records[index * 64:index * 64 + 2] = b"\0\0"
    cut = len(records) // 3                         # (slices cut inside records)
    track.unlink()
    (data / "unaging.compact.task_track.slice_0").write_bytes(records[:cut])
    (data / "unaging.compact.task_track.slice_1").write_bytes(records[cut:])
    # and an aging stream (read first): a second stream the halves are counted across
    aging = records[64 * 10:64 * 30]
    (data / "aging.compact.task_track.slice_0").write_bytes(aging)
    monkeypatch.setattr(slices, "CHUNK_BYTES", 640)              # ten records a chunk
    monkeypatch.setattr(importer, "several_cores", lambda: True)
    monkeypatch.setattr(launches, "several_cores", lambda: True)
    made = {}
    for name, split in (("one", 1 << 62), ("two", 0)):
        monkeypatch.setattr(launches, "SPLIT_TRACK_BYTES", split)
        path = importer.import_result_dir(prof_dir / "host", "host", tmp_path / f"{name}.db")
        with sqlite3.connect(path) as conn:
            made[name] = {table: conn.execute(f"SELECT * FROM {table}").fetchall()
                          for table in ("launch", "op", "launch_count", "notice", "decode_count")}
    assert made["two"] == made["one"]
    launches = made["two"]["launch"]
    assert len(launches) == n - 2 + len(aging) // 64
    # every (device, stream, task) ranked 0, 1, 2, ... in record order, its count in launch_count
    ranks = {}
    for row in launches:
        ranks.setdefault(row[3:6], []).append(row[7])
    assert all(occ == list(range(len(occ))) for occ in ranks.values()) and max(map(len, ranks.values())) > 2
    assert sorted(made["two"]["launch_count"]) == sorted(key + (len(occ),) for key, occ in ranks.items())
    # the other run's two kernels (unnamed here: their hashes are not in this host's hash_dic) are ops 7 and 8,
    # launched only in its records (ten, one of them bad), at the end
    assert len(made["two"]["op"]) == 8
    tensor_ids = {row[8]: row[-1] for row in launches}                 # op → its launches' tensors
    assert sorted(tensor_ids[op] for op in range(1, 7)) == [1, 2, 3, 4, 5, 6] and tensor_ids[7] is tensor_ids[8] is None
    assert {row[8] for row in launches[-9:]} == {7, 8} and {row[8] for row in launches[:-9]} == set(range(1, 7))
    (warning,) = [m for _seq, _level, m in made["two"]["notice"] if "skipped" in m]
    assert warning == ("unaging.compact.task_track.slice_0 offset 192: 2 task_track record(s) skipped (bad magic or"
                       " level)")


def test_a_large_timeline_is_written_in_two_halves(tmp_path, monkeypatch):
    """Above SLICE_EVENTS, with a second core, the child writes the second half of the time range: the
    slices are numbered in time order across both halves, each is valid, and they hold the same slices as
    one process writing them all (a flow whose launch and task fall in different files is left out)."""
    import msprof.trace as tr
    from msprof import workers

    desc = dict(MULTI, iterations=6)
    prof = pg.build(desc)
    prof_dir = pg.write_prof(tmp_path, desc)
    monkeypatch.setattr(tr, "SLICE_EVENTS", 25)
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 1)
    one = api.export_timeline(prof_dir)

    def x_events(paths):
        return sorted((e["pid"], e["name"], e["ts"], e["dur"]) for path in paths
                      for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X")

    single = x_events(one)
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    two = api.export_timeline(prof_dir)
    assert [p.name for p in two] == [f"msprof_slice_{k}.json" for k in range(len(two))]
    assert sorted(p.name for p in (prof_dir / "device_0" / "timeline").iterdir()) == sorted(p.name for p in two)
    last = {}                                       # per process: the latest start so far
    for k, path in enumerate(two):
        trace = json.loads(path.read_text())
        assert check_trace(trace) == [] and trace["otherData"]["slice"] == k
        assert len([e for e in trace["traceEvents"] if e["ph"] != "M"]) <= 25
        for e in trace["traceEvents"]:              # every thread's events go on in time across the files
            if e["ph"] == "X":
                assert e["ts"] >= last.get((e["pid"], e["tid"]), 0)
                last[(e["pid"], e["tid"])] = e["ts"]
    assert x_events(two) == single
    assert len([e for e in single if e[0] == TASK_PID_BASE]) == len(prof.tasks)


@pytest.mark.parametrize("missing", ["device_0/host_start.log.0", "device_0/dev_start.log.0",
                                     "host/data/unaging.api_event.data.slice_0"])
def test_common_data_loss_still_gives_a_timeline(tmp_path, msprof_cli, missing):
    """Issue 10 #6: partial data is normal; the timeline is written and the loss is said."""
    prof_dir = pg.write_prof(tmp_path, dict(MULTI, slices={"api_event": 3}))
    (prof_dir / missing).unlink()
    proc = msprof_cli("export", "timeline", "-dir", prof_dir)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "warning" in proc.stderr
    [path] = (prof_dir / "device_0" / "timeline").glob("*.json")
    trace = json.loads(path.read_text())
    assert check_trace(trace) == []
    assert len([e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == TASK_PID_BASE]) == len(
        pg.build(MULTI).tasks)


def test_py_round_sql_is_pythons_round():
    """The SQL form of Python's round (the aicore time's 2 decimals) gives the very double round() gives:
    at exact ties (odd multiples of 1/8 and 1/16: half to even), one ulp either side of a decimal tie,
    for values that must fall back to Python (negative, large, 2.675 just below its tie), and at random."""
    import random
    import struct

    from msprof.metrics import py_round_sql

    def ulps(x, k):
        return struct.unpack("<d", struct.pack("<q", struct.unpack("<q", struct.pack("<d", x))[0] + k))[0]

    rng = random.Random(11)
    values = [0, 0.0, -0.0, None, 2.675, 2.665, 0.125, 0.375, 0.0625, 0.0005, 1e6, 999999.875, -2.5, -0.0625, 1e20]
    values += [k / 16 for k in range(4000)] + [k / 8 for k in range(4000)]
    values += [ulps(rng.randint(0, 10 ** 6) / 1000 + 0.0005, rng.choice([-1, 0, 1])) for _ in range(20000)]
    values += [ulps(rng.randint(0, 10 ** 5) / 100 + 0.005, rng.choice([-1, 0, 1])) for _ in range(20000)]
    values += [rng.random() * rng.choice([1e-3, 1, 100, 1e5, 2e6]) for _ in range(20000)]
    conn = sqlite3.connect(":memory:")
    conn.create_function("py_round", 2, lambda v, d: None if v is None else round(v, d))
    conn.execute("CREATE TABLE t (x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(v,) for v in values])
    for digits in (2, 3):
        got = [v for (v,) in conn.execute(f"SELECT {py_round_sql('x', digits)} FROM t ORDER BY rowid")]
        want = [None if v is None else round(v, digits) for v in values]
        assert [(repr(g), type(g)) for g in got] == [(repr(w), type(w)) for w in want]


# two threads in step: b1 and a1 start together every iteration and last differently (10 and 5 µs), so a
# part's first wait depends on which of them the reference lists last (a1: its thread comes second), and
# b1, which ends last, is the one the device logged last
TIED = {"iterations": 7, "pmu": "PipeUtilization", "static_graph": True,
        "threads": [{"tid": 7, "stream": 5, "ops": [{"name": "b1", "dur_us": 10}, {"name": "b2", "dur_us": 5}]},
                    {"tid": 3, "stream": 3, "start_us": 10, "ops": [{"name": "a1", "dur_us": 5},
                                                                    {"name": "a2", "dur_us": 10}]}]}


@pytest.mark.parametrize("desc,ties", [(TIED, True), (TIED_ONCE, True),
                                       (dict(MULTI, iterations=7, pmu="PipeUtilization"), False)])
def test_device_import_ranks_the_task_keys_when_tasks_tie(tmp_path, desc, ties):
    """The device's half of task_time's order of tasks that start together, made at import (task_key): every
    (stream, task) with its first start, by that start and then by its first row, and whether it has a task
    that ties; nothing when no two tasks start together."""
    prof = pg.build(desc)
    starts = {}
    for task in prof.tasks:
        starts.setdefault(task.start_syscnt, []).append((task.stream, task.task))
    shared = {key for keys in starts.values() if len(keys) > 1 for key in keys}
    assert bool(shared) == ties
    prof_dir = pg.write_prof(tmp_path, desc)
    api.import_collection(prof_dir)
    conn = sqlite3.connect(prof_dir / "device_0" / "sqlite" / "msprof.db")
    got = conn.execute("SELECT stream_id, task_id, first_start, tied FROM task_key ORDER BY rank").fetchall()
    if not ties:
        assert got == []
        return
    first = {}
    for task in prof.tasks:
        key = (task.stream, task.task)
        first[key] = min(first.get(key, task.start_syscnt), task.start_syscnt)
    first_row = {}
    for seq, stream, task in conn.execute("SELECT seq, stream_id, task_id FROM task ORDER BY seq"):
        first_row.setdefault((stream, task), seq)
    want = sorted(first, key=lambda k: (first[k], first_row[k]))
    assert got == [k + (first[k], int(k in shared)) for k in want]
    assert len({g[2] for g in got}) < len(got)        # (keys whose first starts tie: ranked by their rows)


@pytest.mark.parametrize("fmt,desc", [("csv", dict(MULTI, iterations=7, pmu="PipeUtilization")),
                                      ("json", dict(MULTI, iterations=7, pmu="PipeUtilization")),
                                      ("csv", TIED), ("json", TIED),
                                      ("csv", with_tensors(TIED)), ("json", with_tensors(TIED)),
                                      # parts that begin among tasks the collection did not see
                                      ("csv", dict(MULTI, iterations=7, pmu="PipeUtilization",
                                                   collection_start_us=28))])
def test_prof_summary_written_by_two_processes_is_identical(tmp_path, monkeypatch, fmt, desc):
    """Two processes writing the files, op_summary cut into parts by start time (each part's first wait
    taken from the row before it, in the reference's order where tasks start together) and joined, write
    byte for byte what one process writes."""
    from msprof import summary as summary_writer
    from msprof import workers

    prof = pg.write_prof(tmp_path, desc)
    inline = api.export_summary(prof, fmt=fmt)
    expected = {p.relative_to(prof): p.read_bytes() for p in inline}
    monkeypatch.setattr(summary_writer, "PARALLEL_MIN_ROWS", 0)
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    parallel = api.export_summary(prof, fmt=fmt)
    assert [p.relative_to(prof) for p in parallel] == list(expected)      # same files, same order
    assert {p.relative_to(prof): p.read_bytes() for p in parallel} == expected
    rows = expected[Path("device_0/summary/op_summary." + fmt)].decode()
    tasks = 7 * sum(len(thread["ops"]) for thread in desc["threads"])     # 7 iterations
    tasks -= 2 if desc.get("collection_start_us") else 0                  # (two ended before it began)
    assert (rows.count("\n") - 1 if fmt == "csv" else rows.count('"Op Name"')) == tasks
    assert not [p for p in (prof / "device_0" / "summary").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("desc", [dict(MULTI, iterations=7, pmu="PipeUtilization", jitter=5),          # per launch
                                  dict(MULTI, iterations=7, pmu="PipeUtilization", static_graph=True, jitter=5),
                                  # tasks that ended before the collection began (not counted)
                                  dict(MULTI, iterations=7, pmu="PipeUtilization", collection_start_us=28),
                                  TIED])
@pytest.mark.parametrize("processes", [1, 2])
def test_op_statistic_from_the_op_summary_pass_is_its_own_query(tmp_path, monkeypatch, desc, processes):
    """export summary makes op_statistic from the sums op_summary's pass gathers (in one process, or from the
    parts two processes write): the very file op_statistic's own query makes, and the truth's rows. When the
    pass gathers nothing (a renderer printing values), op_statistic's own query makes it."""
    from msprof import summary as summary_writer
    from msprof import workers
    from msprof.layouts import find_units
    from msprof.layouts.prof import statistics
    from msprof.renderers import insql

    prof = pg.write_prof(tmp_path, desc)
    api.import_collection(prof)
    unit = [u for u in find_units(prof) if u.path.name.startswith("device")][0]
    own = tmp_path / "own"
    with unit.open() as report:
        summary_writer.write_file(report, SummaryFile("op_statistic", ProfReport.op_statistic, (Selection(),)), "csv",
                                  own)
    expected = (own / "op_statistic.csv").read_bytes()
    merged = []
    original = statistics.OpTotals.merged
    monkeypatch.setattr(statistics.OpTotals, "merged", staticmethod(lambda parts: merged.append(len(parts))
                                                                      or original(parts)))
    if processes == 2:
        monkeypatch.setattr(summary_writer, "PARALLEL_MIN_ROWS", 0)
        monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    api.export_summary(prof, fmt="csv")
    written = prof / "device_0" / "summary" / "op_statistic.csv"
    assert written.read_bytes() == expected
    assert merged == [1 if processes == 1 else 8]          # gathered by the pass (of 8 parts), not queried
    rows = read_csv(written)
    truth = expected_op_statistic(pg.build(desc))
    assert [(r["OP Type"], r["Core Type"], int(r["Count"]), float(r["Avg Time(us)"])) for r in rows] == [
        (e["OP Type"], e["Core Type"], int(e["Count"]), float(e["Avg Time(us)"])) for e in truth]
    merged.clear()
    monkeypatch.setattr(insql, "plan", lambda tables, fmt: None)        # every table printed value by value
    api.export_summary(prof, fmt="csv")
    assert written.read_bytes() == expected
    assert merged == []


def test_op_statistic_of_a_static_graph_summed_per_task_id_first(tmp_path, monkeypatch):
    """A static graph's op_statistic sums each (stream, task)'s executions before meeting the host tables:
    the same rows as the general path (every task joined to its launch), and as the truth."""
    desc = dict(MULTI, pmu="PipeUtilization", static_graph=True, iterations=7, jitter=5)
    prof_dir = pg.write_prof(tmp_path, desc)
    api.import_collection(prof_dir)
    from msprof.layouts import find_units
    from msprof.layouts.prof import statistics

    unit = [u for u in find_units(prof_dir) if u.path.name.startswith("device")][0]
    with unit.open() as report:
        assert not statistics.relaunched(report)
        summed = list(report.op_statistic().rows())
        monkeypatch.setattr(statistics, "relaunched", lambda report: True)     # the general path on the same data
        joined = list(report.op_statistic().rows())
    assert summed == joined
    expected = expected_op_statistic(pg.build(desc))
    assert [(r[1], r[2], r[3], r[6]) for r in summed] == [
        (e["OP Type"], e["Core Type"], int(e["Count"]), e["Avg Time(us)"]) for e in expected]


def test_enclosing_call_of_few_calls_over_many_moments_as_by_bisecting_each():
    """The association's enclosing call of a moment: the call begun latest at or before it, unless it ended
    before it; for node calls (``nested``) then the latest begun of the calls still open (the innermost of
    nested calls). Both paths — slices for few calls over many time-ordered moments, bisection for the rest —
    give what a scan of every call gives, on random calls that nest, overlap, share a begin or end before
    they begin."""
    import bisect
    import random

    from msprof.layouts.prof.associate import _Calls

    rng = random.Random(5)
    fast = nested = 0
    for _ in range(3000):
        calls = _Calls.__new__(_Calls)
        begins = sorted(rng.randint(0, 100) for _ in range(rng.randint(0, 6)))
        calls.begins, calls.ends = begins, [b + rng.randint(-3, 40) for b in begins] + [None]
        moments = [rng.randint(-5, 150) for _ in range(rng.randint(1, 80))]
        if rng.random() < 0.8:
            moments.sort()
        latest_begun = [bisect.bisect_right(begins, m) - 1 for m in moments]
        expected = [p if p >= 0 and calls.ends[p] >= m else -1 for p, m in zip(latest_begun, moments)]
        assert calls.enclosing(moments) == expected, (begins, calls.ends, moments)
        innermost = [max((p for p, b in enumerate(begins) if b <= m <= calls.ends[p]), default=-1) for m in moments]
        assert calls.enclosing(moments, nested=True) == innermost, (begins, calls.ends, moments)
        fast += len(begins) * 8 < len(moments) and moments == sorted(moments)
        nested += sum(e != -1 and e != p for e, p in zip(innermost, latest_begun))
    assert nested > 100                # moments after a nested call ended, inside an earlier one
    assert fast > 500                  # the slice path was taken often


def test_pmu_stream_cut_short_says_which_end_it_takes_and_why(tmp_path, msprof_cli):
    """aicore.data records carry no documented mark, so a stream that is not a whole number of records loses
    its extra bytes at the head, as raw-format.md §4 says (the reference does the same); the warning says
    so, and what it means if the file was cut at its end instead."""
    prof = pg.write_prof(tmp_path, {"pmu": "PipeUtilization", "iterations": 5})
    path = next((prof / "device_0" / "data").glob("aicore.data*"))
    data = path.read_bytes()
    path.write_bytes(data[:-47])
    proc = msprof_cli("import", "-dir", prof)
    assert proc.returncode == 0, proc.stderr
    lost = (len(data) - 47) % 128
    assert lost == 81 and (f"{lost} bytes of aicore PMU data lost at the head of {path.name} (partial record, "
                           "ring buffer overwrite; taken to be at the head as the format says, since its records"
                           " carry no mark: had the file been cut at its end instead, every record is misread)"
                           ) in proc.stderr


def _without_api_calls(prof_dir: Path, level: int, thread=None) -> int:
    """The host's api_event records of ``level`` (of ``thread``, or every thread) removed; returns how many."""
    path = next((prof_dir / "host" / "data").glob("*api_event*"))
    data = path.read_bytes()
    records = [data[i:i + 40] for i in range(0, len(data), 40)]
    kept = [r for r in records if not (struct.unpack_from("<H", r, 2)[0] == level
                                       and thread in (None, struct.unpack_from("<I", r, 8)[0]))]
    path.write_bytes(b"".join(kept))
    return len(records) - len(kept)


def test_launches_outside_node_or_model_calls_are_said_as_what_they_lack(tmp_path):
    """A thread whose node-level calls are gone: its tasks are named by their kernel, with a warning that says
    so (and not that a model is missing); an app of single ops (no model-level call at all) gets a notice, not
    a warning: nothing is missing from its data."""
    prof = pg.build(MULTI)
    no_node = pg.write_prof(tmp_path / "a", MULTI)
    assert _without_api_calls(no_node, 10000, thread=2002)
    api.import_collection(no_node)
    launched = sum(1 for x in prof.tasks if x.thread == 2002)
    messages = notices(no_node / "host")
    assert f"{launched} task(s) launched outside a node-level API: named by their kernel (op name and type), as " \
           "the reference names them" in messages, messages
    assert not any("model-level" in m for m in messages), messages
    rows = summary(no_node)["op_summary"]
    assert {r["Op Name"] for r in rows if r["Stream ID"] in ("7", "9")} == {"add1", "conv2", "relu2"}

    single = pg.write_prof(tmp_path / "b", MULTI)
    assert _without_api_calls(single, 15000)
    api.import_collection(single)
    with sqlite3.connect(single / "host" / "sqlite" / "msprof.db") as conn:
        said = conn.execute("SELECT level, message FROM notice WHERE message LIKE '%model-level%'").fetchall()
    assert [level for level, _ in said] == ["notice"] and "Model ID 4294967295" in said[0][1], said
    assert {r["Model ID"] for r in summary(single)["op_summary"]} == {"4294967295"}


def test_a_collection_that_began_after_every_task(tmp_path):
    """Every task ended before the collection began: op_summary and task_time keep no row (their headers
    are written), op_statistic none either, and the export ends cleanly (the look-up of the tasks left out
    must not keep a statement of the connection running past the tables)."""
    prof_dir = pg.write_prof(tmp_path, dict(MULTI, collection_start_us=1000))
    written = api.export_summary(prof_dir, "csv")
    assert {p.name for p in written} >= {"op_summary.csv", "task_time.csv", "op_statistic.csv"}
    out = summary(prof_dir)
    assert out["op_summary"] == [] and out["task_time"] == [] and out["op_statistic"] == []
    header = (prof_dir / "device_0" / "summary" / "op_summary.csv").read_text().splitlines()
    assert len(header) == 1 and header[0].startswith("Device_id,Model ID,Task ID")
