"""The family decoders of issue 37 on bytes packed here per docs/prof-format.md, with exact values: what each
keeps, what it skips and counts (by reason), and that state spans chunks."""
import struct

import pytest

from msprof.decode.aicpu import AicpuDecoder
from msprof.decode.base import Tally
from msprof.decode.compact import CompactDecoder
from msprof.decode.ffts_pmu import FftsPmuDecoder
from msprof.decode.hccl import HCCL_INFO, HCCL_OP_INFO
from msprof.decode.l2_cache import L2CacheDecoder
from msprof.decode.memory import TASK_MEMORY, ModuleMemDecoder, NpuMemDecoder
from msprof.decode.msproftx import MsprofTxDecoder

CONTEXT = "=4HQ4HQ12Q"
BLOCK = "=4HQ2HBBHLHH12Q"


def rows_of(out, table):
    for part in out:
        if getattr(part, "table", None) == table:
            return part.rows
    raise AssertionError(table)


def context_record(stream, task, cycles, counters, start, end, ffts=0, subtask_type=0, subtask=0, overflow=False,
                   func=40):
    head5 = subtask_type | ((1 << 10) if overflow else 0)
    return struct.pack(CONTEXT, func, 0x6BD3, stream, task, 0, head5, subtask, ffts << 13, 0, 0, cycles, 0,
                       *counters, start, end)


def test_ffts_context_and_block_records():
    counters = [1, 2, 3, 4, 5, 6, 7, 8]
    data = (context_record(3, 10, 2000, counters, 100, 200)
            + context_record(3, 10, 2100, counters, 300, 400)                       # second run: exec_n 1
            + context_record(5, 11, 900, counters, 150, 190, ffts=4, subtask_type=6, subtask=2)
            + struct.pack(BLOCK, 41, 0x6BD3, 5, 11, 0, 6, 2, 1 | (3 << 1), 4 << 5, 0, 0, 1, 2, 450, 0,
                          *counters, 150, 190)
            + context_record(3, 12, 10, counters, 500, 400)                         # ends before it starts
            + context_record(3, 13, 10, counters, 1, 2, overflow=True)              # overflowed cycles
            + bytes(128)                                                            # another log (func 0)
            + context_record(3, 14, 1, counters, 1, 2, func=34))                    # an FFTS task log
    tally = Tally(128)
    decoder = FftsPmuDecoder()
    out = decoder.decode(data[:256], tally)            # state carries over chunks
    tally.base = 256                                   # (what load_streams does between chunks)
    out += decoder.decode(data[256:], tally)
    contexts = rows_of(out[:2], "ffts_pmu") + rows_of(out[2:], "ffts_pmu")
    assert contexts == [
        (3, 10, None, 0, 0, 2000, *counters, 100, 200, 0),
        (3, 10, None, 0, 0, 2100, *counters, 300, 400, 1),
        (5, 11, 2, 6, 4, 900, *counters, 150, 190, 0)]
    assert rows_of(out[2:], "ffts_block_pmu") == [(5, 11, 2, 6, 4, 1, 3, 2, 1, 450, *counters, 150, 190, 0)]
    assert tally.counts == {"end before start": 1, "counter overflow (cycle count not valid)": 1,
                            "other STARS log": 2}
    assert tally.quiet == {"other STARS log"}
    assert tally.first["end before start"] == 4 * 128


def block_record(stream, task, subtask, core, block, cycles, ffts=4, subtask_type=6, start=1, end=2):
    return struct.pack(BLOCK, 41, 0x6BD3, stream, task, 0, subtask_type, subtask, core, ffts << 5, 0, 0, 0, block,
                       cycles, 0, *range(8), start, end)


def test_ffts_block_ranks_and_stream_expansion():
    """MIX tasks' blocks are ranked per (stream, task, subtask) across chunks; other blocks get no rank; a
    stream field with bit 12 set is read as the STARS logs read it (task id's high bits from the stream)."""
    data = (block_record(5, 11, 2, 1, 0, 10) + block_record(5, 11, 3, 1, 0, 11)
            + block_record(5, 11, 2, 0, 1, 12, subtask_type=0)                 # not a MIX subtask: no rank
            + block_record(5, 11, 2, 1, 1, 13, ffts=0)                         # not FFTS+: no rank
            + block_record(5, 11, 2, 1, 2, 14, start=9, end=3)                 # ends before it starts
            + block_record(0x1000 | 0xE000 | 7, 0x0005, 2, 1, 0, 15)
            + context_record(0x1000 | 7, 0x0006, 20, list(range(8)), 1, 2))
    tally = Tally(128)
    decoder = FftsPmuDecoder()
    out = decoder.decode(data[:3 * 128], tally)
    tally.base = 3 * 128
    out += decoder.decode(data[3 * 128:], tally)
    blocks = rows_of(out[:2], "ffts_block_pmu") + rows_of(out[2:], "ffts_block_pmu")
    assert [(b[0], b[1], b[2], b[3], b[4], b[5], b[7], b[9], b[-1]) for b in blocks] == [
        (5, 11, 2, 6, 4, 1, 0, 10, 0), (5, 11, 3, 6, 4, 1, 0, 11, 0), (5, 11, 2, 0, 4, 0, 1, 12, None),
        (5, 11, 2, 6, 0, 1, 1, 13, None), (7, 0xE005, 2, 6, 4, 1, 0, 15, 0)]
    assert [c[:3] + c[-1:] for c in rows_of(out[2:], "ffts_pmu")] == [(7, 6, None, 0)]
    assert tally.counts == {"end before start": 1}
    assert tally.first["end before start"] == 4 * 128


def tx_record(info, seg, tid, event, start, end, mark=0, domain=0, message=b"hi", magic=0x5A5A, category=0,
              payload=(0, 0), message_type=0):
    return struct.pack("=HH3IQ2HI2H4Ii5Qi156s", magic, 20500, 0, tid, 232, start, info, seg, 0, 0, 0, 4242, tid,
                       category, event, payload[0], payload[1], start, end, mark, domain, message_type, message)


def test_msproftx_records():
    long = b"x" * 156                                   # no NUL: all 156 bytes are the message
    data = (tx_record(0, 0, 7, 1, 100, 200, category=3, payload=(1, 77), message_type=2, message=b"fwd")
            + tx_record(1, 1, 7, 2, 300, 400, mark=9, domain=(1 << 64) - 5, message=long)
            + tx_record(1, 0, 7, 2, 300, 400, mark=9, domain=(1 << 64) - 5, message=b"\xff\xfeab\0junk")
            + tx_record(2, 0, 7, 0, 1, 1)                                    # unknown info type
            + tx_record(0, 0, 7, 0, 5, 4)                                    # ends before it starts
            + tx_record(0, 0, 7, 0, 1, 1, magic=0))                          # bad magic
    tally = Tally(256)
    out = MsprofTxDecoder().decode(data, tally)
    assert rows_of(out, "msproftx") == [(1, 4242, 7, 3, 1, 1, 77, 100, 200, 2, "fwd")]
    assert rows_of(out, "msproftx_ex") == [(2, 9, 1, 4242, 7, 2, 300, 400, -5, "x" * 156),
                                          (3, 9, 0, 4242, 7, 2, 300, 400, -5, "\ufffd\ufffdab")]
    assert tally.counts == {"unknown info type": 1, "end before start": 1, "bad magic": 1}


def test_hccl_info_and_op_info():
    info = struct.pack("=HHIII4Q6IQ2Id3Q6I112B", 0x5A5A, 5500, 3, 3000, 232, 1_000_100, 77, 5, 1 << 63, 0, 1, 8,
                       0, 2, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0, 1, 8.5, 16, 32, 1048576, 0, 3, 1, 0, 255, 0,
                       *([0] * 112))
    bad = b"\x00" + info[1:]
    tally = Tally(256)
    out = CompactDecoder(HCCL_INFO).decode(info + bad, tally)
    row = out[0].blocks[0]
    assert row == (3000, 1_000_100, 77, 5, -(1 << 63), 0, 1, 8, 0, 2, 0xFFFFFFFF, -1, 0, 1, 8.5, 16, 32, 1048576,
                   0, 3, 1, 0, 255)
    assert tally.counts == {"bad magic or level": 1}
    op = struct.pack("=HHIIIQBBQQQ14B", 0x5A5A, 10000, 5, 3000, 40, 1_000_150, 3, 3, 2, 524288, 99, *([0] * 14))
    out = CompactDecoder(HCCL_OP_INFO, aging=1).decode(op, Tally(64))
    assert out[0].blocks[0] == (3000, 1_000_150, 3, 3, 2, 524288, 99, 1)


def test_aicpu_records():
    node = struct.pack("=HHIIIQHHIQQQQQQQIIQQQQIIIHBB14Q", 0x5A5A, 6000, 0, 0, 232, 9, 3, 1, 0, 0, 1000, 50, 52, 53,
                       0, 1150, 0, 0, 995, 0, 0, 1155, 0, 7, 0, 0, 0, 0, *([0] * 14))
    dp = struct.pack("=HHIIIQ16s64sQQ2Q15Q", 0x5A5A, 6000, 1, 0, 232, 123456, b"Enqueue", b"iterator_default",
                     0, 5, 0, 0, *([0] * 15))
    other = struct.pack("=HHIIIQ232x", 0x5A5A, 6000, 10, 0, 232, 1)
    backwards = node[:40] + struct.pack("=QQQQQQ", 2000, 50, 52, 53, 0, 1500) + node[88:]
    wrong_level = node[:2] + struct.pack("=H", 5000) + node[4:]
    tally = Tally(256)
    out = AicpuDecoder().decode(node + dp + other + backwards + wrong_level, tally)
    assert rows_of(out, "aicpu_task") == [(3, 1, 1000, 1150, 50, 52, 53, 995, 1155, 7)]
    assert rows_of(out, "aicpu_dp") == [(123456, "Enqueue", "iterator_default", 5)]
    assert tally.counts == {"other aicpu record type": 1, "end before start": 1, "bad magic or level": 1}
    assert tally.quiet == {"other aicpu record type"}


def test_memory_records():
    samples = struct.pack("=IIQQQ", 5, 0, 5, 4096, 1 << 30) + bytes(32) + struct.pack("=IIQQQ", 25, 1, 25, 8192, 3)
    tally = Tally(32)
    out = NpuMemDecoder().decode(samples, tally)
    assert out[0].rows == [(5, 0, 5, 4096, 1 << 30), (25, 1, 25, 8192, 3)]
    assert tally.counts == {"all zeros": 1}
    modules = struct.pack("=IIQQ", 7, 0, 1000, 2 << 20) + struct.pack("=IIQQ", 45, 0, 1001, 1 << 63)
    out = ModuleMemDecoder().decode(modules, Tally(24))
    assert out[0].rows == [(7, 1000, 2 << 20), (45, 1001, -1)]            # reversed: the reference's -1
    op = struct.pack("=HHIIIQQqQQQII184B", 0x5A5A, 10000, 6, 1000, 232, 777, 0x1000, -4096, 55, 10, 20, 3, 1,
                     *([0] * 184))
    out = CompactDecoder(TASK_MEMORY).decode(op, Tally(256))
    assert out[0].blocks[0] == (1000, 777, 0x1000, -4096, 55, 10, 20, 3, 1)


def test_l2_cache_records():
    data = struct.pack("=HHHH8Q", 0, 3, 9, 0, 10, 6, 2, 0, 0, 0, 0, 1 << 63) + bytes(72)
    tally = Tally(72)
    out = L2CacheDecoder().decode(data, tally)
    assert out[0].rows == [(0, 3, 9, 10, 6, 2, 0, 0, 0, 0, -(1 << 63))]
    assert tally.counts == {"all zeros": 1}


@pytest.mark.parametrize("decoder, size", [(FftsPmuDecoder, 128), (MsprofTxDecoder, 256), (AicpuDecoder, 256),
                                           (NpuMemDecoder, 32), (ModuleMemDecoder, 24), (L2CacheDecoder, 72)])
def test_record_sizes(decoder, size):
    assert decoder().record_size == size
