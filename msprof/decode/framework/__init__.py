"""Decoders of the FRAMEWORK files of torch_npu and MindSpore result directories (framework.md §2–3), behind
the one decoder contract (msprof.decode.base); the tables they fill: ``msprof.layouts.framework.schema.FRAMEWORK``.

``FAMILIES`` says which file is which: (file name pattern, kind, decoder factory taking the import's shared
``Strings``), first match wins. The patterns match as torch_npu and MindSpore find their files (torch_npu
matches a name's start: ``torch.op_range`` and ``torch.op_range.1`` are the same family).
"""
import re
from pathlib import Path
from typing import Callable, List, Tuple

from msprof.decode.base import Decoder
from msprof.decode.framework import mindspore, torch
from msprof.decode.framework.stream import Strings
from msprof.decode.slices import StreamFiles

FAMILIES: List[Tuple[re.Pattern, str, Callable[[Strings], Decoder]]] = [
    (re.compile(r"^torch\.op_range"), "torch_op_range", torch.OpRangeDecoder),
    (re.compile(r"^torch\.op_mark"), "torch_op_mark", torch.OpMarkDecoder),
    (re.compile(r"^torch\.memory_usage"), "torch_memory", torch.MemoryDecoder),
    (re.compile(r"^torch\.gc_record"), "torch_gc", torch.GcDecoder),
    (re.compile(r"^torch\.python_tracer_func"), "torch_python_func", torch.PythonCallDecoder),
    (re.compile(r"^torch\.python_tracer_hash"), "torch_python_hash", torch.python_hash_decoder),
    (re.compile(r"^torch\.param_tensor_info"), "torch_param_tensor", torch.param_tensor_decoder),
    (re.compile(r"^(op_range_\d+|mindspore\.op_range)$"), "ms_op_range", mindspore.MsOpRangeDecoder),
    (re.compile(r"^cpu_ms_memory_record_\d+\.txt$"), "ms_memory", lambda strings: mindspore.MsMemoryDecoder()),
]


def streams(framework_dir: Path) -> Tuple[List[StreamFiles], List[Path]]:
    """The FRAMEWORK directory's files as streams (one file each, in name order), and the files no family
    claims. Symlinks and empty files are left out, as everywhere in a collection."""
    found, unknown = [], []
    for path in sorted(p for p in Path(framework_dir).iterdir() if p.is_file() and not p.is_symlink()):
        if path.stat().st_size == 0:
            continue
        kind = next((k for pattern, k, _ in FAMILIES if pattern.match(path.name)), None)
        if kind is None:
            unknown.append(path)
        else:
            found.append(StreamFiles(kind, path.name, None, [path]))
    return found, unknown


def decoder_for(kind: str, strings: Strings) -> Decoder:
    return next(make for _, k, make in FAMILIES if k == kind)(strings)
