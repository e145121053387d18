"""Metadata values (issue 10 #9): every number in info.json*, start_info, the sync logs, sample.json,
net.info and layer.info is checked in one place (msprof.collection / msprof.decode.textinfo) into a typed,
bounded record. Hostile values give a clear error naming the file and key (exit 8), or a documented default
with a warning — never exit 1, never a traceback, never a silently wrong timeline (hwts_frequency "inf").

Hand-made cases first, then a seeded fuzz over every metadata file of a JOB and a PROF_ directory."""
import json
import random
import shutil
import struct
from pathlib import Path

import pytest

from fixtures import profgen
from fixtures.board import jobgen
from fixtures.networks import small_job
from msprof.cli import main


def run(*args):
    """msprof in this process (fast: the fuzz runs it a hundred times): (exit code, stderr)."""
    import io
    import logging

    from msprof import console

    stream = io.StringIO()
    try:
        console.configure(0)
        handler = logging.StreamHandler(stream)
        handler.setFormatter(console._StderrFormatter())
        console.log.addHandler(handler)
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            return exc.code, stream.getvalue()
        finally:
            console.log.removeHandler(handler)
    finally:
        console.configure(0)
    return 0, stream.getvalue()


@pytest.fixture(scope="module")
def clean_job(tmp_path_factory):
    return jobgen.write_job(tmp_path_factory.mktemp("job"), small_job())


@pytest.fixture
def job(clean_job, tmp_path):
    copy = tmp_path / clean_job.name
    shutil.copytree(clean_job, copy)
    return copy


def set_json(path: Path, dotted: str, value, first_line=False):
    """Set a key (``DeviceInfo.0.hwts_frequency``) of a JSON file to ``value`` (raw JSON text)."""
    text = path.read_text()
    obj = json.loads(text.split("\n", 1)[0] if first_line else text)
    target, keys = obj, dotted.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    marker = "@@VALUE@@"
    target[keys[-1]] = marker
    path.write_text(json.dumps(obj).replace(json.dumps(marker), value) + "\n")


@pytest.mark.parametrize("value", ['"inf"', "1e999", '"NaN"', "0", "-5", '"50000000"', "true", "[1]"])
def test_hwts_frequency_must_be_a_real_frequency(job, value):
    set_json(job / "info.json.0", "DeviceInfo.0.hwts_frequency", value, first_line=True)
    code, err = run("import", "-dir", job)
    assert code == 8, err
    assert "info.json.0" in err and "hwts_frequency" in err


@pytest.mark.parametrize("file,key,value", [
    ("start_info.0", "collectionTimeBegin", "1e308"),
    ("start_info.0", "collectionTimeBegin", '"inf"'),
    ("start_info.0", "clockMonotonicRaw", '"123456789012345678901"'),
    ("info.json.0", "DeviceInfo.0.aic_frequency", "1e999"),
    ("info.json.0", "DeviceInfo.0.ai_core_num", '"99999999999999999999"'),
])
def test_numbers_out_of_range_name_file_and_key(job, file, key, value):
    set_json(job / file, key, value, first_line=file.startswith("info"))
    code, err = run("import", "-dir", job)
    assert code == 8, err
    assert file in err and key.split(".")[-1] in err


@pytest.mark.parametrize("name,text", [("dev_start.log.0", "cntvct: 123456789012345678901\n"),
                                       ("dev_start.log.0", "cntvct: inf\n"),
                                       ("host_start.log.0", "[Host]\nclock_monotonic_raw: 1e999\n")])
def test_sync_logs(job, name, text):
    (job / name).write_text(text)
    code, err = run("import", "-dir", job)
    assert code == 8, err
    assert name in err


def test_device_info_must_be_an_object_and_json_not_too_deep(job):
    info = job / "info.json.0"
    original = info.read_text()
    info.write_text(json.dumps(dict(json.loads(original), DeviceInfo=[5])) + "\n")
    code, err = run("import", "-dir", job)
    assert code == 8 and "DeviceInfo[0] is not an object" in err
    info.write_text(original)
    (job / "sample.json").write_text("[" * 100_000)
    code, err = run("import", "-dir", job)
    assert code == 8 and "sample.json" in err and "nested too deeply" in err


def test_more_pmu_events_than_counters_are_ignored_with_a_warning(job):
    events = ",".join(hex(0x300 + i) for i in range(11))
    set_json(job / "sample.json", "ai_core_profiling_events", json.dumps(events))
    code, err = run("export", "summary", "-dir", job)
    assert code == 0, err
    assert "11 PMU events" in err and "0x30a" in err


def test_one_bad_line_of_layer_and_net_info_is_skipped_and_counted(job):
    [layer_info] = (job / "data").glob("*.layer.info")
    lines = layer_info.read_text().splitlines()
    layer_info.write_text("\n".join(lines[:2] + ["zero,x,3,Bad,bad,bad", "1,2"] + lines[2:]) + "\n")
    [net_info] = (job / "data").glob("*.net.info")
    net_info.write_text(net_info.read_text() + "garbage without a colon\ninput_pic_num: 1e999\n")
    code, err = run("export", "summary", "-dir", job)
    assert code == 0, err
    assert f"{layer_info.name}: 2 bad line(s) skipped (first: line 3:" in err
    assert f"{net_info.name}: 2 bad line(s) skipped" in err
    summaries = sorted((job / "summary").glob("op_summary_*"))
    assert len(summaries) == 3 and "pool" in summaries[0].read_text()       # the good layers are all there


def test_a_net_info_cut_short_is_said_with_the_keys_it_lacks(job):
    """raw-format.md §5.1 gives every net.info its keys: a file that ends before input_pic_num and layer_num
    (a copy cut short) is imported with defaults and a warning naming what is missing, not silently."""
    [net_info] = (job / "data").glob("*.net.info")
    text = net_info.read_text()
    net_info.write_text(text[:text.index("input_pic_num")])
    code, err = run("export", "summary", "-dir", job)
    assert code == 0, err
    assert f"{net_info.name}: no input_pic_num, layer_num (is the file cut short?): defaults used" in err
    net_info.write_text(text)
    code, err = run("export", "summary", "-dir", job)
    assert code == 0 and "cut short" not in err, err


def test_huge_keys_in_the_prof_dictionaries_and_stars_counters(tmp_path):
    prof = profgen.write_prof(tmp_path, {"platform_version": "5"})
    hash_dic = prof / "host" / "data" / "unaging.additional.hash_dic.slice_0"
    hash_dic.write_text("9" * 5000 + ":huge\n" + hash_dic.read_text())
    types = prof / "host" / "data" / "unaging.additional.type_info_dic.slice_0"
    types.write_text("20000_" + "7" * 5000 + ":huge\n" + types.read_text())
    stars = prof / "device_0" / "data" / "stars_soc.data.0.slice_0"
    data = bytearray(stars.read_bytes())
    struct.pack_into("<Q", data, 8, (1 << 64) - 1)            # the first log's syscnt ≥ 2^63
    stars.write_bytes(bytes(data))
    code, err = run("export", "summary", "-dir", prof)
    assert code == 0, err
    import sqlite3

    with sqlite3.connect(prof / "host" / "sqlite" / "msprof.db") as conn:     # (the host was imported
        notices = [m for (m,) in conn.execute("SELECT message FROM notice")]   # by a worker process)
    assert "unaging.additional.hash_dic.slice_0 line 1: 1 hash_dic record(s) skipped (unreadable line)" in notices
    assert "unaging.additional.type_info_dic.slice_0 line 1: 1 type_info_dic record(s) skipped (unreadable line)" \
        in notices


# --- fuzz ---------------------------------------------------------------------------------------------------
HOSTILE = ['"inf"', '"-inf"', "1e999", "-1e999", '"nan"', "123456789012345678901234567890", '"1e308"', "-1",
           "0", '""', "null", "true", "[]", "{}", '"' + "9" * 5000 + '"', '"x"', "1.5", '"0x10"', "2147483648"]


def metadata_keys(root: Path):
    """(file, dotted key) of every number-ish value in the JSON metadata files under ``root``."""
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and (path.name.startswith(("info.json", "start_info", "end_info")) or
                               path.name == "sample.json"):
            obj = json.loads(path.read_text().split("\n", 1)[0] if path.name.startswith("info") else
                             path.read_text())

            def walk(value, prefix):
                if isinstance(value, dict):
                    for k, v in value.items():
                        walk(v, f"{prefix}{k}.")
                elif isinstance(value, list):
                    for i, v in enumerate(value[:1]):
                        walk(v, f"{prefix}{i}.")
                else:
                    out.append((path, prefix[:-1]))
            walk(obj, "")
    return out


@pytest.mark.parametrize("layout", ["JOB", "PROF"])
def test_fuzz_metadata_values(tmp_path, clean_job, layout):
    """120 seeded runs: a hostile value in a random key of a random metadata file (JSON files and the
    key: value logs). Each ends with exit 0 or 8 (2 when the collection is no longer one), never exit 1."""
    rng = random.Random(f"metadata-{layout}")
    base = tmp_path / "base"
    if layout == "JOB":
        shutil.copytree(clean_job, base / clean_job.name)
        source = base / clean_job.name
    else:
        source = profgen.write_prof(base, {"pmu": "PipeUtilization"})
    keys = metadata_keys(source)
    assert len(keys) > 20
    for trial in range(60):
        work = tmp_path / f"t{trial}"
        shutil.copytree(source, work)
        path, key = rng.choice(keys)
        path = work / path.relative_to(source)
        if rng.random() < 0.2:       # the key: value logs instead
            logs = [p for p in work.rglob("*") if p.name.startswith(("dev_start.log", "host_start.log"))]
            path = rng.choice(logs)
            lines = path.read_text().splitlines()
            k = rng.randrange(len(lines))
            name = lines[k].split(":")[0]
            lines[k] = f"{name}: {rng.choice(HOSTILE).strip(chr(34))}" if ":" in lines[k] else lines[k]
            path.write_text("\n".join(lines) + "\n")
        else:
            set_json(path, key, rng.choice(HOSTILE), first_line=path.name.startswith("info"))
        command = rng.choice([["import"], ["export", "summary"], ["export", "timeline"], ["query"]])
        code, err = run(*command, "-dir", work)
        assert code in (0, 2, 8), f"{path.name} {key}: exit {code}\n{err}"
        assert "internal error" not in err, err
        shutil.rmtree(work)


def test_host_counter_drift_in_ns_rounded_as_the_reference_rounds_it():
    """cntvct_diff ticks at CPU[0].Frequency MHz (1 GHz without one: ns), rounded half to even."""
    from msprof.collection import host_counter_ns

    assert host_counter_ns(12345, 100) == 123450          # 10 ns a tick
    assert host_counter_ns(-7, None) == -7                 # no frequency: the ticks are ns
    assert host_counter_ns(1, 3) == 333                    # 333.33… ns
    assert host_counter_ns(1, 400) == 2                    # 2.5 ns: to the even 2
    assert host_counter_ns(3, 400) == 8                    # 7.5 ns: to the even 8
    assert host_counter_ns(0, 100) == 0


def test_a_host_counter_drift_that_is_no_number_is_ignored_with_a_warning(tmp_path):
    desc = {"cntvct_diff": 5000}
    prof = profgen.write_prof(tmp_path, desc)
    code, err = run("export", "summary", "-dir", prof)
    assert code == 0, err
    good = (prof / "device_0" / "summary" / "task_time.csv").read_text()
    start = float(good.splitlines()[1].split(",")[6])
    for log in [prof / "device_0" / "host_start.log.0"]:
        log.write_text(log.read_text().replace("cntvct_diff: 5000", "cntvct_diff: five"))
    code, err = run("export", "summary", "-dir", prof)
    assert code == 0, err
    assert "cntvct_diff is not a number" in err and "host_start.log.0" in err
    bad = (prof / "device_0" / "summary" / "task_time.csv").read_text()
    assert float(bad.splitlines()[1].split(",")[6]) == pytest.approx(start - 5.0, abs=1e-6)   # 5000 ns less
