"""Tests of the fixture generator itself (fixtures/board/jobgen.py and friends).

Expected values are computed by hand from raw-format.md, not with the generator's helpers:
the written bytes are unpacked with struct and compared with numbers worked out below.
"""
from __future__ import annotations

import configparser
import csv
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures import faults  # noqa: E402
from fixtures.board import jobgen  # noqa: E402
from fixtures.networks import SMALL_COUNTERS, detection_network, small_job, two_model_job  # noqa: E402

BOARD = ROOT / "fixtures" / "board"

# small_job, worked out by hand (see the small_job docstring):
#   host sync 10_001_000_000 ns <-> device counter 2_000_000_000, 100 MHz => 10 ns per tick.
#   ACL: init 10_001_100_000 (+1000 µs), set_device (+500), load (+5000), 2 x malloc (+50),
#   10 µs between calls => first execute starts at 10_007_750_000 ns.
#   iteration start = +20 µs => syscnt 2_000_000_000 + (10_007_770_000 - 10_001_000_000)/10
SMALL_IT1_START = 2_000_677_000
SMALL_T1_START = SMALL_IT1_START + 500            # +5 µs step pad
SMALL_T1_END = SMALL_T1_START + 10_000            # conv1 100 µs
SMALL_T2_START = SMALL_T1_END + 1_000             # +10 µs gap
SMALL_T2_END = SMALL_T2_START + 5_000             # pool 50 µs
SMALL_T3_START = SMALL_T2_END + 1_000
SMALL_T3_END = SMALL_T3_START + 20_000            # nms 200 µs
SMALL_IT1_END = SMALL_T3_END + 500
SMALL_EXEC1_START_NS = 10_007_750_000


def slices(job_dir: Path, prefix: str):
    """Slice files of a stream ordered by the integer after the last '_'."""
    files = [p for p in (job_dir / "data").iterdir()
             if p.name.startswith(prefix + ".") and re.search(r"\.slice_\d+$", p.name)]
    return sorted(files, key=lambda p: int(p.name.rsplit("_", 1)[1]))


def stream(job_dir: Path, prefix: str) -> bytes:
    return b"".join(p.read_bytes() for p in slices(job_dir, prefix))


def unpack_all(fmt: str, data: bytes):
    size = struct.calcsize(fmt)
    assert len(data) % size == 0
    return [struct.unpack_from(fmt, data, i) for i in range(0, len(data), size)]


@pytest.fixture
def small(tmp_path):
    return jobgen.write_job(tmp_path, small_job())


# ------------------------------------------------------------------------------------------
# layout and metadata
# ------------------------------------------------------------------------------------------
def test_job_name_and_layout(small):
    assert re.fullmatch(r"JOB[A-Z]{29}", small.name)
    top = sorted(p.name for p in small.iterdir())
    assert top == ["data", "dev_start.log.0", "end_info.0", "host_start.log.0", "info.json.0",
                   "sample.json", "start_info.0"]
    data = sorted(p.name for p in (small / "data").iterdir())
    assert "tiny.1.net.info" in data and "tiny.1.layer.info" in data
    assert "AclModule.acl_op.0.slice_0" not in data          # no ACL_OP call: no empty file
    assert all((small / "data" / n).stat().st_size > 0 for n in data)


def test_metadata_files(small):
    first = (small / "info.json.0").read_text().split("\n")[0]
    info = json.loads(first)
    assert info["devices"] == "0" and info["platform_version"] == "svp"
    assert info["DeviceInfo"][0]["hwts_frequency"] == "100"
    assert info["DeviceInfo"][0]["aic_frequency"] == "1000"
    assert info["DeviceInfo"][0]["ai_core_num"] == 1
    assert info["CPU"][0]["Frequency"] == ""
    assert int(info["pid"]) == 1000
    sample = json.loads((small / "sample.json").read_text())
    assert sample["ai_core_metrics"] == "ArithmeticUtilization"
    assert sample["ai_core_profiling_events"] == ",".join("0x%x" % e for e in range(0x300, 0x30A))
    assert sample["ai_core_profiling_mode"] == "task-based"
    assert (sample["interval"], sample["acl_api"], sample["aacpu"]) == ("0", "on", "on")
    start = json.loads((small / "start_info.0").read_text())
    assert start == {"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "10000000000"}
    end = json.loads((small / "end_info.0").read_text())
    # end = last call end (finalize) + 1 ms, and collectionTimeEnd follows the same offset
    assert int(end["collectionTimeEnd"]) - 1700000000000000 == \
        (int(end["clockMonotonicRaw"]) - 10000000000) // 1000
    dev = dict(line.split(": ") for line in (small / "dev_start.log.0").read_text().splitlines())
    assert dev == {"cntvct": "2000000000", "clock_monotonic_raw": "10001000000"}
    ini = configparser.ConfigParser()
    ini.read_string((small / "host_start.log.0").read_text())
    sect = ini[ini.sections()[0]]
    assert sect["clock_monotonic_raw"] == "10001000000"
    assert sect["cntvct"] == "2000000000" and sect["cntvct_diff"] == "0"


def test_net_info_and_layer_info_csv(small):
    net = dict(line.split(": ", 1) for line in
               (small / "data" / "tiny.1.net.info").read_text().splitlines())
    assert net == {"model_name": "tiny", "model_id": "1", "batch_num": "1",
                   "input_pic_num": "3", "layer_num": "3"}
    raw = (small / "data" / "tiny.1.layer.info").read_bytes().decode()
    assert '"pool ""max"", 2x2"' in raw                       # RFC 4180 quoting
    rows = list(csv.reader(io.StringIO(raw, newline="")))
    assert rows[0] == ["layer_id", "task_id", "stream_id", "layer_type", "layer_name",
                       "ori_layer_name"]
    assert rows[1:] == [["0", "10", "3", "Convolution", "conv1", "conv1;bn1;relu1"],
                        ["1", "11", "3", "Pooling", 'pool "max", 2x2', ""],
                        ["2", "12", "3", "Proposal", "nms", ""]]


# ------------------------------------------------------------------------------------------
# binary streams
# ------------------------------------------------------------------------------------------
def test_hwts_stream(small):
    files = slices(small, "hwts.data")
    # 3 executions x 3 tasks x 2 records x 64 B = 1152 B in slices of 500 B
    assert [p.stat().st_size for p in files] == [500, 500, 152]
    assert 500 % 64 != 0                                       # records straddle slices
    recs = unpack_all("=BBHHHQ12I", stream(small, "hwts.data"))
    assert len(recs) == 18
    assert [r[0] >> 4 for r in recs] == [i % 16 for i in range(18)]
    assert [r[0] & 7 for r in recs] == [0, 1] * 9
    assert all(r[2] == 0x6BD3 for r in recs)
    assert [r[1] for r in recs[:6]] == [0, 0, 0, 0, 1, 1]      # AA_CORE, AA_CORE, AA_CPU
    assert [r[4] for r in recs[:6]] == [10, 10, 11, 11, 12, 12]
    assert all(r[6] & 0x7FF == 3 for r in recs)
    assert [r[5] for r in recs[:6]] == [SMALL_T1_START, SMALL_T1_END, SMALL_T2_START,
                                        SMALL_T2_END, SMALL_T3_START, SMALL_T3_END]
    # conv1 durations 100, 110, 120 µs = Δsyscnt / 100 MHz
    conv = [(recs[i + 1][5] - recs[i][5]) / 100 for i in range(0, 18, 6)]
    assert conv == [100, 110, 120]


def test_hwts_record_straddles_slice_boundary(small):
    first = slices(small, "hwts.data")[0].read_bytes()
    # bytes 448..499 of slice 0 are the first 52 bytes of record 7 (an end record, counter 7)
    assert first[448] == (7 << 4) | 1
    second = slices(small, "hwts.data")[1].read_bytes()
    whole = first[448:] + second[:12]
    rec = struct.unpack("=BBHHHQ12I", whole)
    assert rec[4] == 10 and rec[0] & 7 == 1                    # end of conv1, execution 2
    assert (rec[5] - struct.unpack_from("=BBHHHQ12I", first, 384)[5]) / 100 == 110


def test_pmu_stream(small):
    files = slices(small, "AAcore.data")
    assert [p.stat().st_size for p in files] == [500, 268]     # 6 records x 128 B
    recs = unpack_all("=BBHHHIIQ10Q6I", stream(small, "AAcore.data"))
    assert len(recs) == 6                                       # AA_CORE tasks only
    assert [r[0] & 7 for r in recs] == [4] * 6
    assert [r[0] >> 4 for r in recs] == list(range(6))
    assert all(r[2] == 0x6BD3 for r in recs)
    assert [r[4] for r in recs] == [10, 11] * 3
    assert [r[6] for r in recs] == [3] * 6
    # total cycles = duration x 1000 MHz
    assert [r[7] for r in recs] == [100000, 50000, 110000, 50000, 120000, 50000]
    assert list(recs[0][8:18]) == SMALL_COUNTERS["conv1"]
    assert list(recs[1][8:18]) == SMALL_COUNTERS['pool "max", 2x2']


def test_step_trace_stream(small):
    recs = unpack_all("=BBHIQQQHHHH", stream(small, "ts_track.data"))
    assert len(recs) == 6
    assert all(r[1] == 10 for r in recs)
    assert [(r[5], r[9]) for r in recs] == [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]
    assert all(r[6] == 1 and r[7] == 3 for r in recs)
    assert (recs[0][4], recs[1][4]) == (SMALL_IT1_START, SMALL_IT1_END)


def test_acl_streams_and_clock_conversion(small):
    groups = {}
    for g in ("acl_op", "acl_model", "acl_rts", "acl_others"):
        groups[g] = unpack_all("=HHIQQII64s4Q", stream(small, "AclModule." + g))
    names = {g: [r[7].rstrip(b"\0").decode() for r in recs] for g, recs in groups.items()}
    assert names["acl_op"] == []
    assert names["acl_model"] == ["svp_acl_mdl_load_from_file"] + ["svp_acl_mdl_execute"] * 3 \
        + ["svp_acl_mdl_unload"]
    assert names["acl_rts"] == ["svp_acl_rt_set_device", "svp_acl_rt_malloc", "svp_acl_rt_malloc",
                                "svp_acl_rt_free", "svp_acl_rt_free", "svp_acl_rt_reset_device"]
    assert names["acl_others"] == ["svp_acl_init", "svp_acl_finalize"]
    for g, t in (("acl_model", 2), ("acl_rts", 3), ("acl_others", 4)):
        assert all(r[0] == 0x5A5A and r[1] == 0 and r[2] == t for r in groups[g])
        assert all((r[5], r[6]) == (1000, 1001) for r in groups[g])
    assert groups["acl_others"][0][3:5] == (10_001_100_000, 10_002_100_000)
    execs = groups["acl_model"][1:4]
    assert [(r[4] - r[3]) // 1000 for r in execs] == [420, 430, 440]
    assert execs[0][3] == SMALL_EXEC1_START_NS
    # §3 by hand: t_ns = (syscnt - cntvct) / (100e6) * 1e9 + clock_monotonic_raw
    t_ns = (SMALL_T1_START - 2_000_000_000) * 10 + 10_001_000_000
    assert t_ns == 10_007_775_000
    assert execs[0][3] < t_ns and (SMALL_IT1_END - 2_000_000_000) * 10 + 10_001_000_000 < execs[0][4]
    # output µs = t_ns/1000 + collectionTimeBegin - clockMonotonicRaw/1000
    job = jobgen.build(small_job())
    assert job.syscnt_to_host_ns(SMALL_T1_START) == 10_007_775_000
    assert job.host_ns_to_output_ns(t_ns) == 1_700_000_000_007_775_000
    assert job.host_ns_to_output_us(t_ns) == pytest.approx(1_700_000_000_007_775, abs=0.5)
    # no calls overlap on the thread
    calls = sorted((r[3], r[4]) for recs in groups.values() for r in recs)
    assert all(a[1] <= b[0] for a, b in zip(calls, calls[1:]))


def test_truth_matches_bytes(small):
    """The Job truth equals what the bytes decode to (for consumers of job.tasks)."""
    job = jobgen.build(small_job())
    recs = unpack_all("=BBHHHQ12I", stream(small, "hwts.data"))
    starts = [r for r in recs if r[0] & 7 == 0]
    ends = [r for r in recs if r[0] & 7 == 1]
    tasks = job.recorded_tasks()
    assert [(t["task_id"], t["start_syscnt"], t["end_syscnt"]) for t in tasks] == \
        [(s[4], s[5], e[5]) for s, e in zip(starts, ends)]
    assert [t["duration_us"] for t in tasks if t["layer_name"] == "conv1"] == [100, 110, 120]
    pmu = unpack_all("=BBHHHIIQ10Q6I", stream(small, "AAcore.data"))
    core = [t for t in tasks if t["task_type"] == "AA_CORE"]
    assert [(t["total_cycles"], [t["counters"][e] for e in range(0x300, 0x30A)]) for t in core] \
        == [(r[7], list(r[8:18])) for r in pmu]
    assert [(i["index_id"], i["start_syscnt"]) for i in job.iterations][0] == (1, SMALL_IT1_START)
    assert job.hwts_mhz == 100 and job.aic_mhz == 1000


def test_deterministic(tmp_path):
    a = jobgen.write_job(tmp_path / "a", small_job())
    b = jobgen.write_job(tmp_path / "b", small_job())
    assert a.name == b.name
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert fa == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in fa)
    assert jobgen.write_job(tmp_path / "c", small_job(), name="JOBX").name == "JOBX"


# ------------------------------------------------------------------------------------------
# collection options
# ------------------------------------------------------------------------------------------
def test_interval_records_every_kth_execution(tmp_path):
    d = jobgen.write_job(tmp_path, small_job(interval=2))
    steps = unpack_all("=BBHIQQQHHHH", stream(d, "ts_track.data"))
    assert [r[5] for r in steps] == [1, 1, 3, 3]
    hw = unpack_all("=BBHHHQ12I", stream(d, "hwts.data"))
    assert len(hw) == 12 and [r[0] >> 4 for r in hw] == list(range(12))
    assert len(stream(d, "AAcore.data")) == 4 * 128
    acl = unpack_all("=HHIQQII64s4Q", stream(d, "AclModule.acl_model"))
    assert sum(r[7].startswith(b"svp_acl_mdl_execute\0") for r in acl) == 3   # host: every call
    assert json.loads((d / "sample.json").read_text())["interval"] == "2"


def test_acl_off_aacpu_off_metrics_off(tmp_path):
    d = jobgen.write_job(tmp_path, small_job(acl_api="off", aacpu=False,
                                             aac_metrics="PipeUtilization"))
    names = [p.name for p in (d / "data").iterdir()]
    assert not any(n.startswith("AclModule") for n in names)
    assert not any(n.lower().startswith("aacore") for n in names)
    hw = unpack_all("=BBHHHQ12I", stream(d, "hwts.data"))
    assert len(hw) == 12 and all(r[1] == 0 for r in hw)        # no AA_CPU task
    sample = json.loads((d / "sample.json").read_text())
    assert (sample["acl_api"], sample["aacpu"], sample["ai_core_metrics"]) == \
        ("off", "off", "PipeUtilization")


def test_no_sync_logs(tmp_path):
    d = jobgen.write_job(tmp_path, small_job(sync_logs=False))
    assert not (d / "dev_start.log.0").exists() and not (d / "host_start.log.0").exists()
    job = jobgen.build(small_job(sync_logs=False))
    assert job.syscnt_to_host_ns(SMALL_T1_START) == SMALL_T1_START * 10   # syscnt / 100 MHz


def test_frequency_changes(tmp_path):
    desc = small_job(freq_changes=[{"before_execution": 2, "mhz": 500}], slice_bytes=700)
    d = jobgen.write_job(tmp_path, desc)
    files = slices(d, "lpmFreqConv.data")
    assert [p.stat().st_size for p in files] == [700, 188]     # one 888 B record, straddling
    raw = stream(d, "lpmFreqConv.data")
    vals = struct.unpack("=II" + "QII" * 55, raw)
    assert vals[0] == 1
    # execution 2 starts 430 µs... after execution 1: find its step-trace start
    steps = unpack_all("=BBHIQQQHHHH", stream(d, "ts_track.data"))
    it2_start = [r[4] for r in steps if r[5] == 2 and r[9] == 0][0]
    assert vals[2:5] == (it2_start - 1, 500, 0)
    pmu = unpack_all("=BBHHHIIQ10Q6I", stream(d, "AAcore.data"))
    assert [r[7] for r in pmu] == [100000, 50000, 55000, 25000, 60000, 25000]


def test_counter_wraps_and_default_slicing(tmp_path):
    desc = small_job(models=[dict(small_job()["models"][0], executions=5)],
                     slice_bytes=1000000)
    d = jobgen.write_job(tmp_path, desc)
    assert len(slices(d, "hwts.data")) == 1
    hw = unpack_all("=BBHHHQ12I", stream(d, "hwts.data"))
    assert [r[0] >> 4 for r in hw] == [i % 16 for i in range(30)]


def test_two_models(tmp_path):
    d = jobgen.write_job(tmp_path, two_model_job())
    assert (d / "data" / "tiny_b.2.layer.info").exists()
    steps = unpack_all("=BBHIQQQHHHH", stream(d, "ts_track.data"))
    assert [(r[6], r[7], r[5]) for r in steps[::2]] == [(1, 3, 1), (1, 3, 2), (2, 5, 1), (2, 5, 2)]


# ------------------------------------------------------------------------------------------
# sample networks
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant,ms", [("mish", 23.3), ("leakyrelu", 14.2)])
def test_detection_network_execute_time(tmp_path, variant, ms):
    d = jobgen.write_job(tmp_path, detection_network(variant))
    acl = unpack_all("=HHIQQII64s4Q", stream(d, "AclModule.acl_model"))
    ex = [r for r in acl if r[7].rstrip(b"\0") == b"svp_acl_mdl_execute"]
    assert len(ex) == 3
    for r in ex:
        assert abs((r[4] - r[3]) / 1e6 - ms) < 0.1
    rows = list(csv.DictReader(io.StringIO(
        next((d / "data").glob("*.layer.info")).read_text(), newline="")))
    types = {r["layer_type"] for r in rows}
    assert any(";" in r["ori_layer_name"] for r in rows)
    assert "Concat" in types and "Pooling" in types and "Upsample" in types
    assert ({"Softplus", "Tanh", "Mul"} <= types) == (variant == "mish")
    hw = unpack_all("=BBHHHQ12I", stream(d, "hwts.data"))
    assert sum(r[1] == 1 for r in hw) == 2 * 3                 # one AA_CPU layer


def test_mish_layers_are_memory_bound(tmp_path):
    d = jobgen.write_job(tmp_path, detection_network("mish", executions=1))
    rows = list(csv.DictReader(io.StringIO(
        next((d / "data").glob("*.layer.info")).read_text(), newline="")))
    by_task = {int(r["task_id"]): r for r in rows}
    pmu = unpack_all("=BBHHHIIQ10Q6I", stream(d, "AAcore.data"))
    seen = set()
    for r in pmu:
        c = r[8:18]
        mem = max(c[4], c[6], c[7]) / max(c[0], c[3])           # max(dstr,dld,wld)/max(mac,vecp)
        typ = by_task[r[4]]["layer_type"]
        if typ in ("Softplus", "Tanh", "Mul"):
            assert mem > 1 and c[0] == 0
        elif typ == "Convolution":
            assert mem < 1 and c[0] > c[2]
        seen.add(typ)
    assert {"Softplus", "Convolution"} <= seen


# ------------------------------------------------------------------------------------------
# board simulator
# ------------------------------------------------------------------------------------------
def run_main(cwd: Path, acl=None, sim=None, board=BOARD):
    if sim is not None:
        tmp_board = cwd / "board"
        tmp_board.mkdir()
        for f in ("main", "jobgen.py"):
            shutil.copy2(board / f, tmp_board / f)
        (tmp_board / "sim.json").write_text(json.dumps(sim))
        board = tmp_board
    if acl is not None:
        (cwd / "acl.json").write_text(json.dumps(acl))
    return subprocess.run([str(board / "main")], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_main_profiles_with_options(tmp_path):
    assert os.access(BOARD / "main", os.X_OK)
    p = run_main(tmp_path, {"profiler": {"switch": "on", "output": "prof", "interval": "2",
                                         "acl_api": "off", "aacpu": "off",
                                         "aac_metrics": "ArithmeticUtilization"},
                            "dump": {"dump_path": "x"}})
    assert p.returncode == 0, p.stderr
    assert "execute 3/3 ok: 23.3 ms" in p.stdout and p.stderr
    jobs = list((tmp_path / "prof").iterdir())
    assert len(jobs) == 1 and re.fullmatch(r"JOB[A-Z]{29}", jobs[0].name)
    names = [f.name for f in (jobs[0] / "data").iterdir()]
    assert not any(n.startswith("AclModule") for n in names)
    steps = unpack_all("=BBHIQQQHHHH", stream(jobs[0], "ts_track.data"))
    assert sorted({r[5] for r in steps}) == [1, 3]
    hw = unpack_all("=BBHHHQ12I", stream(jobs[0], "hwts.data"))
    assert hw and all(r[1] == 0 for r in hw)


def test_main_metrics_off_and_switch_off(tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    p = run_main(a, {"profiler": {"switch": "on", "output": str(a / "out"),
                                  "aac_metrics": "PipeUtilization"}})
    assert p.returncode == 0, p.stderr
    job = next((a / "out").iterdir())
    assert not slices(job, "AAcore.data") and slices(job, "AclModule.acl_model")
    b = tmp_path / "b"
    b.mkdir()
    p = run_main(b, {"profiler": {"switch": "off", "output": "out"}})
    assert p.returncode == 0 and not (b / "out").exists()
    c = tmp_path / "c"
    c.mkdir()
    p = run_main(c)                                             # no acl.json
    assert p.returncode == 0 and "execute 1/3" in p.stdout and list(c.iterdir()) == []


def test_main_sim_json(tmp_path):
    p = run_main(tmp_path, {"profiler": {"switch": "on", "output": "out"}},
                 sim={"variant": "leakyrelu", "executions": 2, "exit_code": 3,
                      "job_name": "JOBSIMSIMSIMSIMSIMSIMSIMSIMSIMSIM", "write_bytes": 100000})
    assert p.returncode == 3
    assert "execute 2/2 ok: 14.2 ms" in p.stdout
    job = tmp_path / "out" / "JOBSIMSIMSIMSIMSIMSIMSIMSIMSIMSIM"
    assert (job / "data" / "yolov3_tiny_leaky.1.net.info").exists()
    assert (tmp_path / "out" / "fill.bin").stat().st_size == 100000


def test_main_second_run_gets_new_name(tmp_path):
    acl = {"profiler": {"switch": "on", "output": "out"}}
    assert run_main(tmp_path, acl, sim={"executions": 1}).returncode == 0
    shutil.rmtree(tmp_path / "board")
    assert run_main(tmp_path, acl, sim={"executions": 1}).returncode == 0
    assert len(list((tmp_path / "out").iterdir())) == 2


# ------------------------------------------------------------------------------------------
# faults
# ------------------------------------------------------------------------------------------
def test_fault_tail_cut(small):
    t = faults.tail_cut(small, "hwts", 20)
    data = stream(small, "hwts.data")
    assert len(data) == 1152 - 20 and t["bytes_lost"] == 44 == len(data) % 64
    assert t["records_after"] == 17 and t["first_lost_record"] == 17


def test_fault_head_partial(small):
    t = faults.head_partial(small, "pmu", 30)
    data = stream(small, "AAcore.data")
    assert len(data) == 768 - 30 and t["bytes_lost"] == 98 == len(data) % 128
    assert t["first_record"] == 1
    rec = struct.unpack_from("=BBHHHIIQ10Q6I", data, 98)       # drop 98 bytes from the head
    assert rec[0] >> 4 == 1 and rec[7] == 50000


def test_fault_straddle(small):
    t = faults.straddle(small, "step", 90)
    files = slices(small, "ts_track.data")
    assert [f.stat().st_size for f in files] == [90, 90, 60]
    assert t["straddling_records"] == [2, 4]
    assert len(unpack_all("=BBHIQQQHHHH", stream(small, "ts_track.data"))) == 6


def test_fault_bad_magic(small):
    t = faults.bad_magic(small, "acl_model", 1)
    recs = unpack_all("=HHIQQII64s4Q", stream(small, "AclModule.acl_model"))
    assert recs[1][0] == 0xDEAD and t["name"] == "svp_acl_mdl_execute"
    assert sum(r[0] == 0x5A5A for r in recs) == 4 == t["records_valid"]


def test_fault_counter_gap(small):
    t = faults.hwts_counter_gap(small, index=2, count=2)
    recs = unpack_all("=BBHHHQ12I", stream(small, "hwts.data"))
    assert len(recs) == 16
    assert [r[0] >> 4 for r in recs[:3]] == [0, 1, 4]
    assert (t["counter_before"], t["counter_after"], t["next_task_id"]) == (1, 4, 12)


def test_fault_unmatched(tmp_path):
    a = jobgen.write_job(tmp_path / "a", small_job())
    t = faults.end_without_start(a)
    recs = unpack_all("=BBHHHQ12I", stream(a, "hwts.data"))
    assert (recs[0][0] & 7, recs[0][4]) == (1, 10) and t["task_id"] == 10
    assert [r[0] >> 4 for r in recs] == [i % 16 for i in range(17)]   # renumbered: no gap
    b = jobgen.write_job(tmp_path / "b", small_job())
    t = faults.start_never_ended(b)
    recs = unpack_all("=BBHHHQ12I", stream(b, "hwts.data"))
    assert (recs[-1][0] & 7, recs[-1][4]) == (0, 12) and t["unmatched_starts"] == 1
    assert t["paired_tasks"] == 8


def test_fault_missing_files_and_corruption(tmp_path):
    d = jobgen.write_job(tmp_path / "a", small_job())
    assert faults.missing_pmu(d)["removed"] == ["AAcore.data.0.slice_0", "AAcore.data.0.slice_1"]
    assert len(faults.missing_acl(d)["removed"]) == 5          # 640 B + 768 B + 256 B
    assert faults.missing_step_trace(d)["removed"] == ["ts_track.data.0.slice_0"]
    assert faults.missing_layer_info(d)["removed"] == ["tiny.1.layer.info"]
    assert sorted(p.name for p in (d / "data").iterdir()) == [
        "hwts.data.0.slice_0", "hwts.data.0.slice_1", "hwts.data.0.slice_2", "tiny.1.net.info"]
    t = faults.corrupt_info_json(d)
    assert t == {"file": "info.json.0", "line": 1}
    with pytest.raises(ValueError):
        json.loads((d / "info.json.0").read_text().split("\n")[0])
    faults.empty_data(d)
    assert (d / "data").is_dir() and not list((d / "data").iterdir())


# ------------------------------------------------------------------------------------------
# demo data
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["JOB", "PROF_"])
def test_demo_data_is_current(kind, tmp_path):
    """The bundled samples (`msprof demo`, `msprof demo --prof`) are what fixtures/make_demo.py writes."""
    demo = ROOT / "msprof" / "demo_data"
    samples = [p for p in demo.iterdir() if p.name.startswith(kind)]
    assert len(samples) == 1
    size = sum(p.stat().st_size for p in samples[0].rglob("*") if p.is_file())
    assert size < 200 * 1024
    subprocess.run([sys.executable, str(ROOT / "fixtures" / "make_demo.py"), "--out",
                    str(tmp_path)], check=True, capture_output=True)
    fresh = tmp_path / samples[0].name
    files = sorted(p.relative_to(samples[0]) for p in samples[0].rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
    assert all((samples[0] / f).read_bytes() == (fresh / f).read_bytes() for f in files)


def test_extra_calls_flags_done_files_and_custom_events(tmp_path):
    desc = small_job(extra_acl_calls=[{"name": "svp_acl_op_execute", "api_type": 1,
                                       "duration_us": 7},
                                      {"name": "svp_acl_custom", "api_type": 7}],
                     hwts_stream_flags=0x800, done_files=True,
                     events=["0x300", "0x302", 0x3FF])
    for ly in desc["models"][0]["layers"][:2]:
        ly.pop("counters")
    d = jobgen.write_job(tmp_path, desc)
    op = unpack_all("=HHIQQII64s4Q", stream(d, "AclModule.acl_op"))
    assert [(r[2], r[4] - r[3]) for r in op] == [(1, 7000)]
    others = unpack_all("=HHIQQII64s4Q", stream(d, "AclModule.acl_others"))
    assert [r[2] for r in others] == [4, 7, 4]                # init, custom, finalize
    assert (d / "data" / "hwts.data.0.slice_0.done").exists()
    hw = unpack_all("=BBHHHQ12I", stream(d, "hwts.data"))
    assert all(r[6] == 0x800 | 3 for r in hw)
    assert json.loads((d / "sample.json").read_text())["ai_core_profiling_events"] == \
        "0x300,0x302,0x3ff"
    pmu = unpack_all("=BBHHHIIQ10Q6I", stream(d, "AAcore.data"))
    # conv1 execution 1: 100000 cycles, Convolution ratios mac_busy .72, vec_busy .18;
    # unknown 0x3ff -> total * 16 // 32; unused slots 0
    assert list(pmu[0][8:18]) == [72000, 18000, 50000] + [0] * 7
