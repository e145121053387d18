"""``msprof --analyze=on``: PROF_x/analyze/communication.json and communication_matrix.json
(msprof.layouts.prof.families.hccl_analysis) against the reference analyser's ``analyze -r
communication,communication_matrix`` on generated HCCL data (fixtures/families/hccl.py), byte for byte; and
what the command does without HCCL data or with a rule it does not know."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from famtest import generate, need_reference, reference
from reference_runner import reference_script
from test_ecosystem import _oracle_env, oracles  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[1]
ALL_EXPORT = 0x072211
RULES = ("communication", "communication_matrix")


def _task(name, kind, stream, dur_us, **fields):
    return dict(name=name, kind=kind, stream=stream, dur_us=dur_us, **fields)


# a send op over RDMA (3 closing tasks: no barrier), SDMA transits on every link, a payload run left unclosed
SEND = {"name": "hcom_send_", "type": "HcomSend", "tasks": [
    _task("Notify_Wait", "NOTIFY_WAIT", 40, 3, transport="LOCAL", link="ON_CHIP", remote_rank=3),
    _task("RDMASend", "MEMCPY_ASYNC", 40, 4, transport="RDMA", link="ROCE", size=3000000, remote_rank=3,
          rdma="RDMA_SEND_PAYLOAD"),
    _task("RDMASend", "MEMCPY_ASYNC", 40, 5, transport="RDMA", link="ROCE", size=250000, remote_rank=3,
          rdma="RDMA_SEND_PAYLOAD"),
    _task("RDMASend", "MEMCPY_ASYNC", 40, 1, transport="RDMA", link="ROCE", size=8, remote_rank=3,
          rdma="RDMA_SEND_NOTIFY"),
    _task("Notify_Wait", "NOTIFY_WAIT", 40, 2.5, transport="LOCAL", link="ON_CHIP", remote_rank=3),
    _task("Memcpy", "MEMCPY_ASYNC", 40, 6, transport="SDMA", link="PCIE", size=40000000, remote_rank=1),
    _task("Memcpy", "MEMCPY_ASYNC", 41, 7, transport="SDMA", link="SIO", size=1500000, remote_rank=2, plane=1,
          master=False),
    _task("Reduce_Inline", "REDUCE_ASYNC", 41, 2, transport="SDMA", link="HCCS_SW", size=700000, remote_rank=2,
          plane=1, master=False),
    _task("Memcpy", "MEMCPY_ASYNC", 40, 3, transport="SDMA", link="ON_CHIP", size=65536, remote_rank=0),
    _task("Memcpy", "MEMCPY_ASYNC", 40, 2, transport="SDMA", link="ROCE", size=1000, remote_rank=0xFFFFFFFF),
    _task("RDMASend", "MEMCPY_ASYNC", 40, 4, transport="RDMA", link="ROCE", size=500000, remote_rank=3,
          rdma="RDMA_SEND_PAYLOAD")]}
REDUCE = {"name": "hcom_allReduce_", "type": "HcomAllReduce", "tasks": [
    _task("RDMASend", "MEMCPY_ASYNC", 50, 9, transport="RDMA", link="ROCE", size=600000, remote_rank=4,
          rdma="RDMA_SEND_PAYLOAD"),
    _task("RDMASend", "MEMCPY_ASYNC", 50, 1, transport="RDMA", link="ROCE", size=8, remote_rank=4,
          rdma="RDMA_SEND_NOTIFY"),
    _task("Notify_Wait", "NOTIFY_WAIT", 50, 4, transport="LOCAL", link="ON_CHIP", remote_rank=4),
    _task("Notify_Record", "NOTIFY_RECORD", 50, 1, transport="LOCAL", link="ON_CHIP", remote_rank=4),
    _task("Notify_Wait", "NOTIFY_WAIT", 50, 2, transport="LOCAL", link="ON_CHIP", remote_rank=4),
    _task("Memcpy", "MEMCPY_ASYNC", 50, 8, transport="SDMA", link="HCCS", size=33554432, remote_rank=1)]}

SCENARIOS = {
    # the generator's all-reduce on a STARS chip, once per iteration (two executions of one op)
    "stars_per_launch": {"platform_version": "5", "iterations": 2, "drv_version": ALL_EXPORT,
                         "families": {"hccl": {}}},
    # two ops of a static graph on an HWTS chip, three iterations
    "hwts_static_two_ops": {
        "platform_version": "2", "iterations": 3, "static_graph": True, "drv_version": ALL_EXPORT,
        "families": {"hccl": {"ops": [
            {"name": "hcom_broadcast_", "type": "HcomBroadcast", "tasks": [
                _task("Memcpy", "MEMCPY_ASYNC", 30, 3.5, size=4096)]},
            {"name": "hcom_allGather_", "type": "HcomAllGather", "tasks": [
                _task("Notify_Wait", "NOTIFY_WAIT", 31, 1, transport="LOCAL"),
                _task("Memcpy", "MEMCPY_ASYNC", 31, 7, size=65536),
                _task("Memcpy", "MEMCPY_ASYNC", 32, 9, size=65536, master=False)]}]}}},
    # RDMA payloads (with and without a barrier), every link, an invalid remote rank, rank 5 of 16
    "rdma_and_links": {"platform_version": "5", "iterations": 2, "drv_version": ALL_EXPORT,
                       "families": {"hccl": {"rank": 5, "rank_size": 16, "group": "pp_group_7",
                                             "ops": [SEND, REDUCE]}}},
}


def _msprof(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "msprof", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_analyze_writes_the_references_bytes(tmp_path, name):
    need_reference()
    written = generate(tmp_path, SCENARIOS[name])
    ref = reference(written, tmp_path, [], analyze=",".join(RULES))
    proc = _msprof("--analyze=on", "--output=%s" % written.path)
    assert proc.returncode == 0, proc.stderr
    for rule in RULES:
        theirs = (ref["dir"] / "analyze" / (rule + ".json")).read_bytes()
        ours = (written.path / "analyze" / (rule + ".json")).read_bytes()
        assert ours == theirs, "%s.json:\nmsprof    %s\nreference %s" % (rule, ours.decode(), theirs.decode())
        assert (written.path / "analyze" / (rule + ".json")).stat().st_mode & 0o027 == 0
    document = json.loads((written.path / "analyze" / "communication.json").read_bytes())
    print("analyze %s: %d op executions, both files the reference's bytes" % (name, len(document) - 1))


def test_rdma_split_and_matrix_exact(tmp_path):
    """The send op's split worked out by hand from the scenario (the generator's times), over its master
    plane 0: transit = the two RDMA payloads from the first one's start to the end of the task closing them
    (2 places after the payloads: the second Notify_Wait, which is then not counted as a wait), plus the PCIE
    memcpy and the ROCE one (the ON_CHIP one is local: not a transit; the last payload has no closing task:
    left out); wait = synchronization = the first Notify_Wait (before any transit)."""
    written = generate(tmp_path, SCENARIOS["rdma_and_links"])
    proc = _msprof("--analyze=on", "--rule=communication_matrix,communication", "--output=%s" % written.path)
    assert proc.returncode == 0, proc.stderr
    document = json.loads((written.path / "analyze" / "communication.json").read_text())
    send = next(v for k, v in document.items() if k.startswith("hcom_send_"))["Communication Time Info"]
    tasks = {t["name"] + str(i): t for i, t in enumerate(written.truth["hccl"]["ops"][0]["tasks"])}
    payload_start = tasks["RDMASend1"]["start_ns"]
    closed = tasks["Notify_Wait4"]["end_ns"]      # third task after the payloads, less 2: the Notify_Wait
    transit = (closed - payload_start) / 1e6 + 0.006 + 0.002
    assert send["Transit Time(ms)"] == pytest.approx(transit, abs=1e-12)
    assert send["Wait Time(ms)"] == pytest.approx(0.003, abs=1e-12)
    assert send["Synchronization Time(ms)"] == pytest.approx(0.003, abs=1e-12)
    assert send["Wait Time Ratio"] == round(0.003 / (0.003 + transit), 4)
    assert send["Idle Time(ms)"] == pytest.approx(send["Elapse Time(ms)"] - transit - 0.003, abs=1e-12)
    matrix = json.loads((written.path / "analyze" / "communication_matrix.json").read_text())
    links = next(v for k, v in matrix.items() if k.startswith("hcom_send_"))
    # RDMA 5-3, PCIE 5-1, SIO and HCCS_SW 5-2 (plane 1), ON_CHIP 5-0 (LOCAL); the invalid remote is 5-5 (ROCE:
    # no transport type the matrix knows)
    assert list(links) == ["5-3", "5-1", "5-0", "5-5", "5-2"]
    assert [links[k]["Transport Type"] for k in links] == ["RDMA", "PCIE", "LOCAL", None, "HCCS"]
    assert links["5-3"]["Transit Size(MB)"] == pytest.approx(3.25)
    assert links["5-2"]["Transit Size(MB)"] == pytest.approx(2.2)
    assert links["5-2"]["Transit Time(ms)"] == pytest.approx(0.009)


def test_without_communication_data_nothing_is_written(tmp_path):
    written = generate(tmp_path, {"platform_version": "5", "iterations": 1})
    proc = _msprof("--analyze=on", "--output=%s" % written.path)
    assert proc.returncode == 0, proc.stderr
    assert "no communication (HCCL) data, nothing to analyse" in proc.stderr
    assert not (written.path / "analyze").exists()


def test_an_unknown_rule_is_refused_before_anything_is_read(tmp_path):
    written = generate(tmp_path, SCENARIOS["stars_per_launch"])
    proc = _msprof("--analyze=on", "--rule=communication,bandwidth", "--output=%s" % written.path)
    assert proc.returncode == 2 and "--rule=bandwidth: unknown rule" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (written.path / "analyze").exists()
    assert not (written.path / "host" / "sqlite").exists()


# the checks of ../shared/oracles/consumers.py that read analyze/ (the cluster's communication files and its
# groups); the others read the timeline's Communication lanes, not this command's files
CLUSTER_CHECKS = ("cluster: ran on both exports", "cluster: cluster_analysis_output/cluster_communication.json",
                  "cluster: cluster_analysis_output/cluster_communication_matrix.json",
                  "cluster: cluster_analysis_output/communication_group.json")


@pytest.mark.oracles
def test_msprof_analyze_cluster_reads_our_analyses_as_the_references(tmp_path, oracles):
    """msprof-analyze's cluster analysis of our PROF_ (--export=on, --analyze=on) and of the reference's
    (export timeline, summary, analyze): the same cluster_communication*.json and communication_group.json."""
    written = generate(tmp_path, SCENARIOS["rdma_and_links"])
    ours, theirs = tmp_path / "ours" / written.path.name, tmp_path / "ref" / written.path.name
    shutil.copytree(written.path, ours)
    shutil.copytree(written.path, theirs)
    for option in ("--export=on", "--analyze=on"):
        proc = _msprof(option, "--output=%s" % ours)
        assert proc.returncode == 0, proc.stderr
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    for args in (["import"], ["export", "timeline"], ["export", "summary"],
                 ["analyze", "-r", ",".join(RULES)]):
        command = [sys.executable, "-B", str(reference_script()), args[0]] + args[1:2] * (args[0] == "export")
        command += ["-dir", str(theirs)] + args[1:] * (args[0] == "analyze")
        assert subprocess.run(command, env=env, capture_output=True, timeout=600).returncode == 0, command
    proc = subprocess.run([sys.executable, oracles / "consumers.py", ours, theirs, "--out", tmp_path / "consumers",
                           "--timeout", "300"], capture_output=True, text=True, env=_oracle_env(), timeout=1800)
    passed = {line[len("PASS "):] for line in proc.stdout.splitlines() if line.startswith("PASS ")}
    assert set(CLUSTER_CHECKS) <= passed, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_the_analyze_command_and_its_output_option(tmp_path):
    """``msprof analyze -dir D -r communication --output OUT``: the reference's syntax; with --output the
    databases and analyze/ go under OUT, and the collection is left as it was."""
    written = generate(tmp_path, SCENARIOS["stars_per_launch"])
    out = tmp_path / "out"
    proc = _msprof("analyze", "-dir", written.path, "-r", "communication", "--output", out)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in (out / written.path.name / "analyze").iterdir()] == ["communication.json"]
    assert not (written.path / "analyze").exists() and not (written.path / "host" / "sqlite").exists()
    document = json.loads((out / written.path.name / "analyze" / "communication.json").read_text())
    assert len(document) == 3 and "Total HCCL Operators" in document
