"""LiteRT: whole-model time, the operator list and the delegated partitions; no per-operator time.

What ai-edge-litert 2.3's Python Interpreter exposes (checked): no profiler (its op profiler lives in the C++
``benchmark_model`` tool, which the wheel does not ship; the wheel's ``benchmark_litert_model.py`` times whole
runs of the CompiledModel API), ``experimental_preserve_all_tensors`` (intermediate values, not times) and
``_get_ops_details()``: every operator of the model, then one "DELEGATE" node per partition a delegate took
(XNNPACK on the CPU, the Edge TPU delegate's). Which operators a partition holds is found by walking back from
its outputs to its inputs through the operators that produce them.
"""

from __future__ import annotations

from typing import cast

from .job import Collected, ProfileJob
from .schema import OpEvent

CPU_KERNELS = "CPU (TFLite kernels)"
EDGETPU_OP = "edgetpu-custom-op"
NOTE = ("LiteRT's Python interpreter exposes no per-operator times (the op profiler is in the C++ benchmark_model "
        "tool, not in the ai-edge-litert wheel): whole-model time, the operators and the delegated partitions")


def collect(job: ProfileJob) -> Collected:
    from ..executors.litert import LiteRTExecutor  # loaded already: it is the class being profiled

    executor = cast(LiteRTExecutor, job.open())  # collector_for chose this collector by the executor's class
    records = job.time_runs(lambda: executor.run(job.inputs))
    with executor.borrowed_interpreter() as interpreter:
        ops, partitions = describe(interpreter)
    graph = {"partitions": partitions, "operators": len(ops)}
    return Collected(records, False, NOTE, graph, listed=ops)


def describe(interpreter) -> tuple[list[OpEvent], list[dict]]:
    """Every operator of the primary subgraph, named after its first output tensor, with what ran it (the Edge
    TPU for a partition holding the edgetpu-custom-op, XNNPACK for the other delegated partitions: the executor
    adds no other delegate, CPU_KERNELS for the rest); and the partitions."""
    details = interpreter._get_ops_details()
    names = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
    ops = [d for d in details if d["op_name"] != "DELEGATE"]
    by_index = {d["index"]: d for d in ops}
    producer = {int(t): d["index"] for d in ops for t in d["outputs"]}
    where: dict[int, str] = {}
    partitions = []
    for number, node in enumerate(d for d in details if d["op_name"] == "DELEGATE"):
        members = partition_members(node, producer, by_index)
        label = "EdgeTPU" if any(by_index[i]["op_name"] == EDGETPU_OP for i in members) else "XNNPACK"
        for i in members:
            where[i] = label
        partitions.append({"partition": number, "delegate": label, "operators": len(members),
                           "types": sorted({by_index[i]["op_name"] for i in members})})
    events = []
    for d in ops:
        outputs = [int(t) for t in d["outputs"] if int(t) >= 0]
        name = names.get(outputs[0], f"op{d['index']}") if outputs else f"op{d['index']}"
        events.append(OpEvent(name, d["op_name"], where.get(d["index"], CPU_KERNELS), None))
    return events, partitions


def partition_members(node: dict, producer: dict[int, int], by_index: dict[int, dict]) -> set[int]:
    """The operators a DELEGATE node replaced: from its outputs back to its inputs (or to constants and model
    inputs, which no operator produces)."""
    stop = {int(t) for t in node["inputs"]}
    members: set[int] = set()
    stack = [int(t) for t in node["outputs"]]
    while stack:
        tensor = stack.pop()
        if tensor in stop or tensor not in producer:
            continue
        index = producer[tensor]
        if index in members:
            continue
        members.add(index)
        stack.extend(int(t) for t in by_index[index]["inputs"] if int(t) >= 0)
    return members
