"""FRAMEWORK decoders (msprof.decode.framework) on bytes packed here per framework.md §2–3: exact values, records
cut by chunk boundaries anywhere, lost data counted and named by file and offset, real SQLite tables."""
import sqlite3
import struct

import pytest

from msprof.decode import framework as F
from msprof.decode.base import Tally, load_streams
from msprof.decode.framework import mindspore, stream, torch
from msprof.layouts.framework.schema import FRAMEWORK
from msprof.store import Notices, sqlite_utils_database


def tlv(kind: int, value: bytes) -> bytes:
    return struct.pack("<HI", kind, len(value)) + value


def op_range(start, end, seq=-1, pid=4242, tid=4243, fields=None) -> bytes:
    inner = b"".join(tlv(k, v if isinstance(v, bytes) else v.encode()) for k, v in (fields or {}).items())
    return tlv(1, struct.pack("<3q4QB?", start, end, seq, pid, tid, tid, 0, 3, True) + inner)


def decode_all(decoder, data: bytes, cuts=()):
    """Feed ``data`` in chunks cut at ``cuts``; the rows of every table, the tally."""
    tally = Tally(decoder.record_size)
    out = {}
    bounds = [0] + list(cuts) + [len(data)]
    for a, b in zip(bounds, bounds[1:]):
        for rows in decoder.decode(data[a:b], tally):
            out.setdefault(rows.table, []).extend(rows.rows)
        tally.base += b - a
    decoder.finish(tally)
    return out, tally


FIRST = op_range(1000, 5000, 7, fields={2: "aten::add", 3: "float;float", 4: "8,64;8,64", 8: "a.py(1): f;b.py(2): g",
                                        9: "nn.Module: Net_0", 10: "flops:12"})
SECOND = op_range(6000, 6500, fields={2: "aten::view", 4: b"\xff\xfe"})


def test_op_range_records_decode_to_exact_rows_and_shared_strings():
    decoder = torch.OpRangeDecoder()
    out, tally = decode_all(decoder, FIRST + SECOND)
    strings = dict(out["fw_string"])
    rows = [tuple(strings.get(v, v) if i >= 10 else v for i, v in enumerate(r)) for r in out["torch_op"]]
    assert rows == [
        (0, 1000, 5000, 7, 4242, 4243, 4243, 0, 3, 1, "aten::add", "float;float", "8,64;8,64", None, None, None,
         "a.py(1): f;b.py(2): g", "nn.Module: Net_0", "flops:12"),
        (1, 6000, 6500, -1, 4242, 4243, 4243, 0, 3, 1, "aten::view", None, "N/A", None, None, None, None, None,
         None)]
    assert decoder.records == 2 and tally.total == 0 and decoder.tail_lost == 0
    assert decoder.undecodable == 1
    assert any("1 torch.op_range string(s) not UTF-8: kept as N/A" in m for m in decoder.messages(str))


def test_a_repeated_record_is_counted_each_time_it_has_a_bad_string():
    decoder = torch.OpRangeDecoder()
    out, _ = decode_all(decoder, SECOND * 3)
    assert decoder.undecodable == 3 and len(out["torch_op"]) == 3
    assert [r[0] for r in out["torch_op"]] == [0, 1, 2] and len(out["fw_string"]) == 2


@pytest.mark.parametrize("cut", range(1, len(FIRST) + len(SECOND)))
def test_a_record_cut_by_a_chunk_boundary_anywhere_decodes_the_same(cut):
    whole, _ = decode_all(torch.OpRangeDecoder(), FIRST + SECOND)
    split, tally = decode_all(torch.OpRangeDecoder(), FIRST + SECOND, cuts=[cut])
    assert split["torch_op"] == whole["torch_op"] and sorted(split["fw_string"]) == sorted(whole["fw_string"])


def test_a_value_shorter_than_its_struct_is_lost_data_counted_at_its_offset():
    short = tlv(1, b"\x00" * 57)
    decoder = torch.OpRangeDecoder()
    out, tally = decode_all(decoder, FIRST + short + SECOND)
    assert [r[1] for r in out["torch_op"]] == [1000, 6000]
    assert tally.counts == {"value shorter than its 58-byte struct: data lost": 1}
    assert tally.first["value shorter than its 58-byte struct: data lost"] == len(FIRST)
    assert decoder.records == 3 and [r[0] for r in out["torch_op"]] == [0, 2]


def test_an_end_before_its_start_or_an_all_zero_record_is_skipped():
    decoder = torch.OpRangeDecoder()
    bad = op_range(9000, 8000)
    zero = tlv(1, bytes(58))
    out, tally = decode_all(decoder, bad + zero + FIRST, cuts=[3])
    assert [r[1] for r in out["torch_op"]] == [1000]
    assert tally.counts == {"an end before its start": 1, "all-zero record": 1}
    assert tally.first["all-zero record"] == len(bad)


def test_a_field_running_past_its_record_ends_the_fields_and_is_counted():
    value = struct.pack("<3q4QB?", 1, 2, 0, 1, 1, 1, 0, 0, False) + tlv(2, b"aten::mm") + struct.pack("<HI", 4, 99) + b"1,2"
    decoder = torch.OpRangeDecoder()
    out, _ = decode_all(decoder, tlv(1, value))
    name = dict(out["fw_string"])[out["torch_op"][0][10]]
    assert name == "aten::mm" and out["torch_op"][0][12] is None and decoder.cut_fields == 1


def test_a_record_cut_at_the_end_is_lost_and_said_where(tmp_path):
    path = tmp_path / "torch.op_range"
    path.write_bytes(FIRST + SECOND[:20])
    conn, counts, notices = _load(tmp_path, path)
    assert conn.execute("SELECT count(*) FROM torch_op").fetchone() == (1,)
    assert counts["torch.op_range"].tail_lost == 20 and counts["torch.op_range"].records == 1
    assert notices.items == [("warning", "torch.op_range offset %d: the last torch.op_range record is cut short: "
                                         "20 bytes lost" % len(FIRST))]


def test_a_damaged_length_loses_the_rest_without_reading_it_into_memory():
    decoder = torch.OpRangeDecoder()
    damaged = struct.pack("<HI", 1, stream.MAX_RECORD + 1) + b"x" * 100
    out, tally = decode_all(decoder, FIRST + damaged + SECOND, cuts=[len(FIRST) + 10])
    assert len(out["torch_op"]) == 1 and decoder.tail_lost == len(damaged) + len(SECOND)
    assert "longer than" in decoder.messages(lambda at: "offset %d" % at)[0]


def test_op_marks_keep_their_fields_and_skip_an_unknown_category():
    marks = b"".join(tlv(2, struct.pack("<q4Q", t, cat, 9, tid, 4242) + tlv(1, b"aclnnAdd"))
                     for t, cat, tid in [(100, 0, 1), (130, 1, 1), (150, 2, 2), (190, 3, 2), (200, 4, 2)])
    decoder = torch.OpMarkDecoder()
    out, tally = decode_all(decoder, marks, cuts=[7, 50])
    assert [r[:6] for r in out["op_mark"]] == [(0, 100, 0, 9, 1, 4242), (1, 130, 1, 9, 1, 4242),
                                               (2, 150, 2, 9, 2, 4242), (3, 190, 3, 9, 2, 4242)]
    assert {r[6] for r in out["op_mark"]} == {1} and out["fw_string"] == [(1, "aclnnAdd")]
    assert tally.counts == {"a category the format does not have": 1}


def test_memory_records_in_field_order():
    value = struct.pack("<7q2b3B2Q", 0x12C0000000, 5000, -512, 1024, 20 << 20, 512, 0xAAAA0000, 20, 1, 0, 2, 0,
                        4243, 4242)
    out, _ = decode_all(torch.MemoryDecoder(), tlv(3, value))
    assert out["torch_memory"] == [(0, 0x12C0000000, 5000, -512, 1024, 20 << 20, 512, 0xAAAA0000, 20, 1, 0, 2, 0,
                                    4243, 4242)]


def test_fixed_records_and_a_cut_tail():
    gc = struct.pack("<3Q", 4242, 100, 300) + struct.pack("<3Q", 4242, 500, 400) + struct.pack("<3Q", 4242, 700, 800)
    decoder = torch.GcDecoder()
    out, tally = decode_all(decoder, gc + b"\x01\x02", cuts=[30])
    assert out["gc_record"] == [(0, 4242, 100, 300), (2, 4242, 700, 800)]
    assert tally.counts == {"an end before its start": 1} and tally.first["an end before its start"] == 24
    assert decoder.tail_lost == 2 and decoder.records == 3
    calls = struct.pack("<4QB", 10, 1, 4242, 1001, 0) + struct.pack("<4QB", 20, 1, 4242, 1001, 1)
    out, _ = decode_all(torch.PythonCallDecoder(), calls, cuts=[5, 40])
    assert out["py_call"] == [(0, 10, 1, 4242, 1001, 0), (1, 20, 1, 4242, 1001, 1)]


def test_key_text_files():
    data = tlv(4, struct.pack("<Q", 1001) + tlv(1, b"train.py(48): step")) + tlv(4, struct.pack("<Q", 2 ** 64 - 1))
    out, _ = decode_all(torch.python_hash_decoder(), data)
    assert out["py_name"] == [(0, 1001, "train.py(48): step"), (1, -1, None)]
    params = tlv(5, struct.pack("<Q", 7) + tlv(2, b"exp_avg>float"))
    out, _ = decode_all(torch.param_tensor_decoder(), params)
    assert out["param_tensor"] == [(0, 7, None, "exp_avg>float")]


def test_mindspore_op_range_and_memory_lines():
    value = struct.pack("<5Qi3Hb3?", 77, 2 ** 64 - 1, 3, 1000, 1500, 4242, 2, 4, 0, 1, False, False, False)
    data = tlv(1, value + tlv(13, b"Add") + tlv(14, b"Default/network/Add-op1"))
    out, _ = decode_all(mindspore.MsOpRangeDecoder(), data, cuts=[60])
    strings = dict(out["fw_string"])
    row = out["ms_op"][0]
    assert row[:14] == (0, 77, -1, 3, 1000, 1500, 4242, 2, 4, 0, 1, 0, 0, 0)
    assert [strings[i] for i in row[14:16]] == ["Add", "Default/network/Add-op1"] and row[16:] == (None,) * 3
    lines = ["Timestamp(ns),Total Allocated(Byte),Total Reserved(Byte),Total Active(Byte)", "100,1,2,3", "x,1,2",
             "200,4,5,6"]
    decoder = mindspore.MsMemoryDecoder()
    tally = Tally(1)
    rows = decoder.decode(lines, tally)[0].rows
    assert rows == [(1, 100, 1, 2, 3), (3, 200, 4, 5, 6)] and tally.counts == {"not four integers": 1}


def test_framework_directory_files_go_to_their_families(tmp_path):
    for name, data in [("torch.op_range", FIRST), ("torch.op_mark.1", b"x"), ("op_range_0", b"y"),
                       ("cpu_ms_memory_record_0.txt", b"h\n"), ("notes.txt", b"?"), ("torch.gc_record", b"")]:
        (tmp_path / name).write_bytes(data)
    found, unknown = F.streams(tmp_path)
    assert [(s.kind, s.stem) for s in found] == [("ms_memory", "cpu_ms_memory_record_0.txt"),
                                                 ("ms_op_range", "op_range_0"), ("torch_op_mark", "torch.op_mark.1"),
                                                 ("torch_op_range", "torch.op_range")]
    assert [p.name for p in unknown] == ["notes.txt"]


def _load(tmp_path, path):
    conn = sqlite3.connect(str(tmp_path / "fw.db"))
    FRAMEWORK.create(sqlite_utils_database(conn))
    strings = stream.Strings()
    found, _ = F.streams(path.parent)
    counts, notices = {}, Notices(echo=False)
    load_streams(conn, [s for s in found if s.files == [path]], lambda item: F.decoder_for(item.kind, strings),
                 notices, counts)
    return conn, counts, notices


def test_load_streams_fills_the_schema_tables(tmp_path):
    path = tmp_path / "torch.op_range"
    path.write_bytes(FIRST + SECOND)
    conn, counts, notices = _load(tmp_path, path)
    got = conn.execute("SELECT o.start, o.end, s.text FROM torch_op o JOIN fw_string s ON s.id = o.name "
                       "ORDER BY o.seq").fetchall()
    assert got == [(1000, 5000, "aten::add"), (6000, 6500, "aten::view")]
    assert counts["torch.op_range"].records == 2 and counts["torch.op_range"].bytes == len(FIRST + SECOND)
    assert notices.items == [("warning", "1 torch.op_range string(s) not UTF-8: kept as N/A")]
