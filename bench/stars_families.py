"""The ``stars-families`` PROF_ shape of bench/run.py: a STARS chip (platform 5) whose static graph runs AI Core,
AI Vector Core, MIX and AI CPU tasks, with every data family of issue 37 written beside them
(fixtures/families): the ffts_profile AI Core PMU (a context record per AI Core, AI Vector Core and MIX task
run, 4 block records per MIX run), step trace, msproftx, HCCL (an all-reduce per iteration), AI CPU, memory
and L2 cache."""

TEXT = ("platform 5 (STARS), one model of 1000 ops in a static graph: 50% AI_CORE, 20% AI_VECTOR_CORE, 10% MIX_AIC, "
        "10% MIX_AIV (4 blocks of the second core each), 10% AI_CPU; ffts_profile PMU (PipeUtilizationExct), step "
        "trace, msproftx, HCCL, AI CPU, memory and L2 cache data")
# (task type, op type, block dim, mix block) of op i % 10; a MIX op's block dim 1 makes the reference's mix
# block num (block dim x mix block) the number of block records the generator writes per run
KINDS = [("AI_CORE", "Conv2D", 8, 0), ("AI_CORE", "MatMul", 8, 0), ("AI_CORE", "Conv2D", 16, 0),
         ("AI_VECTOR_CORE", "Relu", 4, 0), ("AI_VECTOR_CORE", "Add", 4, 0), ("MIX_AIC", "FlashAttention", 1, 4),
         ("MIX_AIV", "MatMulAllReduce", 1, 4), ("AI_CORE", "MatMul", 24, 0), ("AI_CORE", "Conv2D", 8, 0),
         ("AI_CPU", "Cast", 1, 0)]
FAMILIES = {"ffts_pmu": {}, "step_trace": {"all_reduce": 1}, "mstx": {}, "hccl": {}, "aicpu": {}, "memory": {},
            "l2_cache": {}}


def describe(desc: dict) -> dict:
    """bench/run.py's profgen description made this shape's: platform 5, the ops' kinds, the families."""
    desc = dict(desc, platform_version="5", model_as_events=True, families=FAMILIES)
    desc.pop("pmu", None)        # (a STARS chip's AI Core PMU is ffts_profile's, not aicore.data's)
    for thread in desc["threads"]:
        for i, op in enumerate(thread["ops"]):
            task_type, op_type, block_dim, mix_block = KINDS[i % len(KINDS)]
            op.update(task_type=task_type, type=op_type, block_dim=block_dim,
                      **({"mix_block": mix_block} if mix_block else {}))
    return desc
