"""HCCL host records (docs/prof-format.md, "HCCL"), both with the additional/compact header (magic 0x5A5A,
level) the other host records have, so they are ``CompactFamily`` records (msprof.decode.compact):

* ``(un)aging.additional.hccl_info`` — 256 B ``=HHIII4Q6IQ2Id3Q6I112B``, level 5500 (communication): one per
  communication task, inside its HCCL-level call: the task's name (item id, a hash_dic id), ccl tag, group
  (a hash id), local and remote rank, rank size, work flow mode, plane, context id, notify id, stage, role,
  estimated duration (a double), source and destination addresses, size (bytes), reduce op type, data type,
  link type, transport type and RDMA type;
* ``(un)aging.compact.hccl_op_info`` — 64 B ``=HHIIIQBBQQQ14B``, level 10000 (node): one per communication op,
  inside its node call: flags (bit 0 relay, bit 1 retry), data type, algorithm type (4 bits per phase), count
  and group (a hash id).
"""
from msprof.decode.api_event import LEVEL_NODE
from msprof.decode.blocks import RecordLayout
from msprof.decode.compact import CompactFamily

LEVEL_HCCL = 5500

HCCL_INFO = CompactFamily("hccl_info", LEVEL_HCCL, RecordLayout(
    "hccl_info", "8xI4xqqqqIIIIIIqIIdqqqIIIII116x",
    ["thread", "ts", "item_id", "ccl_tag", "group_id", "local_rank", "remote_rank", "rank_size", "work_flow_mode",
     "plane_id", "context_id", "notify_id", "stage", "role", "duration_estimated", "src_addr", "dst_addr", "size",
     "op_type", "data_type", "link_type", "transport_type", "rdma_type"]), False)
HCCL_OP_INFO = CompactFamily("hccl_op_info", LEVEL_NODE, RecordLayout(
    "hccl_op_info", "8xI4xqBBqqq14x", ["thread", "ts", "flags", "data_type", "alg_type", "count", "group_id"],
    extras=["aging"]), True)

assert (HCCL_INFO.layout.size, HCCL_OP_INFO.layout.size) == (256, 64)

# the names the reference prints for the enumerations of hccl_info (any other value: the number)
ROLES = {0: "DST", 1: "SRC", 255: "RESERVED", 4294967295: "INVALID_TYPE"}
REDUCE_OPS = {0: "SUM", 1: "MUL", 2: "MAX", 3: "MIN", 255: "RESERVED", 4294967295: "INVALID_TYPE"}
DATA_TYPES = {0: "INT8", 1: "INT16", 2: "INT32", 3: "FP16", 4: "FP32", 5: "INT64", 6: "UINT64", 7: "UINT8",
              8: "UINT16", 9: "UINT32", 10: "FP64", 11: "BFP16", 12: "INT128", 14: "HIF8", 15: "FP8E4M3",
              16: "FP8E5M2", 17: "FP8E8M0", 255: "RESERVED", 4294967295: "INVALID_TYPE"}
LINK_TYPES = {0: "ON_CHIP", 1: "HCCS", 2: "PCIE", 3: "ROCE", 4: "SIO", 5: "HCCS_SW", 6: "STANDARD_ROCE", 7: "UB",
              8: "UBoE", 255: "RESERVED", 4294967295: "INVALID_TYPE"}
TRANSPORT_TYPES = {0: "SDMA", 1: "RDMA", 2: "LOCAL", 3: "UB", 4: "ROCE", 255: "RESERVED", 4294967295: "INVALID_TYPE"}
RDMA_TYPES = {0: "RDMA_SEND_NOTIFY", 1: "RDMA_SEND_PAYLOAD", 255: "RESERVED", 4294967295: "INVALID_TYPE"}
