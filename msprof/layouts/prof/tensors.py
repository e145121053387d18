"""GE tensor descriptions of the ops (``*.additional.tensor_info.*``): what op_summary prints as Input Shapes,
Input Data Types, Input Formats, Output Shapes, Output Data Types and Output Formats (docs/prof-format.md §3).

A record (256 B: magic, level 10000, type, thread, length, timestamp, node id hash, tensor count, then 5
tensors of 11 words: input 0 / output 1, format, data type, 8 dimensions) describes up to five tensors of the
node call it falls in; an op with more tensors has several records with the same (thread, timestamp, node).
Per record, each side (inputs, outputs) that has tensors gives three texts (formats, data types, shapes of
its tensors joined by ";", a shape's non-zero dimensions by ","); a node's records are merged by joining the
sides' texts with ";". Shapes are printed inside double quotes, as the reference prints them; a side
without tensors is N/A.

Ops repeat, so each distinct merged description gets a small id (``tensor`` rows), and each launch carries the
id of its node call's description (not its op: with dynamic shapes every launch may have its own).
"""
import struct
from typing import Dict, List, Optional, Tuple

from msprof.decode.base import Rows

TENSORS_PER_RECORD = 5
WORDS_PER_TENSOR = 11
UNDEFINED = 0xFFFFFFFF
RECORD_BODY = struct.Struct("<I55I")     # a record from its tensor count on (after 32 bytes of head)

# GE's DataType and Format enums (their names are what the reference prints)
_DATA_TYPE_NAMES = (
    "FLOAT FLOAT16 INT8 INT32 UINT8 - INT16 UINT16 UINT32 INT64 UINT64 DOUBLE BOOL STRING DUAL_SUB_INT8 "
    "DUAL_SUB_UINT8 COMPLEX64 COMPLEX128 QINT8 QINT16 QINT32 QUINT8 QUINT16 RESOURCE STRING_REF DUAL DT_VARIANT "
    "DT_BF16 DT_UNDEFINED DT_INT4 DT_UINT1 DT_INT2 DT_UINT2 DT_COMPLEX32 DT_HIFLOAT8 DT_FLOAT8_E5M2 "
    "DT_FLOAT8_E4M3FN DT_FLOAT8_E8M0 DT_FLOAT6_E3M2 DT_FLOAT6_E2M3 DT_FLOAT4_E2M1 DT_FLOAT4_E1M2 DT_MAX").split()
_NUMBER_TYPE_NAMES = ("NUMBER_TYPE_BEGIN_ BOOL_ INT_ INT8_ INT16_ INT32_ INT64_ UINT_ UINT8_ UINT16_ UINT32_ "
                      "UINT64_ FLOAT_ FLOAT16_ FLOAT32_ FLOAT64_ COMPLEX_ NUMBER_TYPE_END_").split()
DATA_TYPES: Dict[int, str] = {
    **{v: n for v, n in enumerate(_DATA_TYPE_NAMES) if n != "-"},
    **{229 + k: n for k, n in enumerate(_NUMBER_TYPE_NAMES)},
    UNDEFINED: "UNDEFINED",
}
_FORMAT_NAMES = (
    "NCHW NHWC ND NC1HWC0 FRACTAL_Z NC1C0HWPAD NHWC1C0 FSR_NCHW FRACTAL_DECONV C1HWNC0 FRACTAL_DECONV_TRANSPOSE "
    "FRACTAL_DECONV_SP_STRIDE_TRANS NC1HWC0_C04 FRACTAL_Z_C04 CHWN FRACTAL_DECONV_SP_STRIDE8_TRANS HWCN "
    "NC1KHKWHWC0 BN_WEIGHT FILTER_HWCK HASHTABLE_LOOKUP_LOOKUPS HASHTABLE_LOOKUP_KEYS HASHTABLE_LOOKUP_VALUE "
    "HASHTABLE_LOOKUP_OUTPUT HASHTABLE_LOOKUP_HITS C1HWNCoC0 MD NDHWC FRACTAL_ZZ FRACTAL_NZ NCDHW DHWCN NDC1HWC0 "
    "FRACTAL_Z_3D CN NC DHWNC FRACTAL_Z_3D_TRANSPOSE FRACTAL_ZN_LSTM FRACTAL_Z_G RESERVED ALL NULL ND_RNN_BIAS "
    "FRACTAL_ZN_RNN NYUV NYUV_A NCL FRACTAL_Z_WINO C1HWC0 FRACTAL_NZ_C0_16 FRACTAL_NZ_C0_32 FRACTAL_NZ_C0_2 "
    "FRACTAL_NZ_C0_4 FRACTAL_NZ_C0_8 END").split()
_OLD_FORMAT_NAMES = ("UNKNOWN_ DEFAULT_ NC1KHKWHWC0_ ND_ NCHW_ NHWC_ HWCN_ NC1HWC0_ FRAC_Z_ C1HWNCOC0_ FRAC_NZ_ "
                     "NC1HWC0_C04_ FRACTAL_Z_C04_ NDHWC_ FRACTAL_ZN_LSTM_ FRACTAL_ZN_RNN_ ND_RNN_BIAS_ NDC1HWC0_ "
                     "NCDHW_ FRACTAL_Z_3D_ DHWNC_ DHWCN_").split()
FORMATS: Dict[int, str] = {**dict(enumerate(_FORMAT_NAMES)), **{200 + k: n for k, n in enumerate(_OLD_FORMAT_NAMES)},
                           0xFF: "MAX"}

# op_summary's tensor columns and their ``tensor`` table columns, in the order ``merged`` gives the texts
COLUMNS = (("Input Shapes", "input_shapes"), ("Input Data Types", "input_data_types"),
           ("Input Formats", "input_formats"), ("Output Shapes", "output_shapes"),
           ("Output Data Types", "output_data_types"), ("Output Formats", "output_formats"))

# one side of one record: its (shapes in quotes, data types, formats) texts, or None without tensors there
Side = Optional[Tuple[str, str, str]]


def format_name(value: int) -> str:
    """A format word: the low byte names the format, the next two bytes a sub-format ("FRACTAL_Z:16"); a low
    byte GE does not name prints the whole word."""
    if value == UNDEFINED:
        return "UNDEFINED"
    name = FORMATS.get(value & 0xFF)
    if name is None:
        return str(value)
    sub = (value & 0xFFFF00) >> 8
    return f"{name}:{sub}" if sub else name


def record_sides(count: int, words: tuple) -> Tuple[Side, Side]:
    """(inputs, outputs) of one record; ``words`` its 55 tensor words (a count above 5: the 5 it holds)."""
    sides: List[list] = [[], []]
    for k in range(min(count, TENSORS_PER_RECORD)):
        tensor = words[k * WORDS_PER_TENSOR:(k + 1) * WORDS_PER_TENSOR]
        if tensor[0] in (0, 1):
            sides[tensor[0]].append(tensor)
    return tuple(_side(tensors) if tensors else None for tensors in sides)


def _side(tensors: list) -> Tuple[str, str, str]:
    return ('"' + ";".join(",".join(str(d) for d in t[3:] if d) for t in tensors) + '"',
            ";".join(DATA_TYPES.get(t[2], "UNDEFINED") for t in tensors),
            ";".join(format_name(t[1]) for t in tensors))


def merged(records: List[Tuple[Side, Side]]) -> Tuple[str, str, str, str, str, str]:
    """The six op_summary texts of a node's records (``COLUMNS``)."""
    return merged_texts([(r[0] or ("N/A",) * 3) + (r[1] or ("N/A",) * 3) for r in records])


def merged_texts(parts: List[tuple]) -> tuple:
    """The six texts of descriptions that make one (``COLUMNS`` order each): each side's texts joined by ";",
    the shapes inside one pair of quotes; N/A for a side none of them has."""
    out = []
    for side in (0, 3):
        texts = [p[side:side + 3] for p in parts if p[side] != "N/A"]
        if texts:
            out += ['"' + ";".join(t[0][1:-1] for t in texts) + '"', ";".join(t[1] for t in texts),
                    ";".join(t[2] for t in texts)]
        else:
            out += ["N/A"] * 3
    return tuple(out)


class TensorContents(dict):
    """Merged descriptions (a tuple of records' sides) → a small id; ``take_new``: the ``tensor`` rows not yet
    written. Records' sides are computed once per distinct record body.

    Both are caches of at most ``HELD`` entries, emptied when full: with dynamic shapes every launch may
    bring its own description, and memory must not grow with the launches (a description met again after
    that gets a second id and row, with the same texts)."""

    HELD = 1 << 14

    def __init__(self):
        super().__init__()
        self.sides: Dict[bytes, Tuple[Side, Side]] = {}
        self.new: List[tuple] = []
        self.last_id = 0

    def sides_of(self, body: bytes) -> Tuple[Side, Side]:
        """The sides of a record whose bytes from its tensor count on are ``body``."""
        found = self.sides.get(body)
        if found is None:
            if len(self.sides) >= self.HELD:
                self.sides.clear()
            count, *words = RECORD_BODY.unpack(body)
            found = self.sides[body] = record_sides(count, tuple(words))
        return found

    def __missing__(self, records: tuple) -> int:
        if len(self) >= self.HELD:
            self.clear()
        self.last_id += 1
        self[records] = self.last_id
        self.new.append((self.last_id,) + merged(list(records)))
        return self.last_id

    def new_id(self, texts: tuple) -> int:
        """A description made of others (``merged_texts``): a new id and row."""
        self.last_id += 1
        self.new.append((self.last_id,) + texts)
        return self.last_id

    def take_new(self) -> Rows:
        """The ``tensor`` rows not yet written."""
        rows, self.new = self.new, []
        return Rows("tensor", ("tensor_id",) + tuple(column for _title, column in COLUMNS), rows)
