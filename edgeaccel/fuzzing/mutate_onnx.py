"""Structure-aware ONNX mutations through the ``onnx`` protobuf classes: node types, inputs, attributes,
initializer shapes and data, graph I/O types and shapes, opsets, external-data locations. The result is
serialized protobuf, so it gets past the parser and reaches the checker and the runtimes.
"""

from __future__ import annotations

import random

INT_EDGES = (-(2**63), -(2**31), -2, -1, 0, 1, 2, 3, 7, 255, 65536, 2**31 - 1, 2**40)
OP_TYPES = ("Conv", "MaxPool", "AveragePool", "Gemm", "MatMul", "Reshape", "Gather", "Concat", "Slice", "Add",
            "Relu", "Softmax", "Transpose", "QuantizeLinear", "DequantizeLinear", "LSTM", "Resize", "TopK", "Pad",
            "Split", "Expand", "Tile", "ConvTranspose", "Einsum", "NonMaxSuppression", "ScatterND", "Identity",
            "GlobalAveragePool", "Flatten", "BatchNormalization", "Loop", "If", "Unknown")


def mutate(data: bytes, rng: random.Random, count: int | None = None) -> tuple[bytes, list[str]]:
    """Apply 1..3 structural mutations to a serialized ONNX model; return the mutant and what was done."""
    import onnx

    model = onnx.ModelProto()
    model.ParseFromString(data)
    done = []
    for _ in range(count or rng.randint(1, 3)):
        try:
            what = rng.choice(_MUTATORS)(model, rng)
        except (IndexError, ValueError):  # nothing of that kind in this model
            what = None
        if what:
            done.append(what)
    return model.SerializeToString(), done


def _node(model, rng):
    k = rng.randrange(len(model.graph.node))
    return k, model.graph.node[k]


def _names(model) -> list[str]:
    g = model.graph
    return [*(v.name for v in g.input), *(i.name for i in g.initializer), *(o for n in g.node for o in n.output)]


def node_op_type(model, rng):
    k, node = _node(model, rng)
    node.op_type = rng.choice(OP_TYPES)
    return f"node {k} becomes {node.op_type}"


def node_input(model, rng):
    k, node = _node(model, rng)
    if not node.input:
        node.input.append("x")
    j = rng.randrange(len(node.input))
    node.input[j] = rng.choice(("", "dangling_name", *_names(model)))
    return f"node {k} input {j} = {node.input[j]!r}"


def node_drop_input(model, rng):
    k, node = _node(model, rng)
    del node.input[rng.randrange(len(node.input))]
    return f"node {k} loses an input ({len(node.input)} left)"


def node_add_input(model, rng):
    k, node = _node(model, rng)
    node.input.append(rng.choice(("", *_names(model))))
    return f"node {k} gains input {node.input[-1]!r}"


def node_output(model, rng):
    k, node = _node(model, rng)
    j = rng.randrange(len(node.output))
    node.output[j] = rng.choice(("", "renamed", *_names(model)))
    return f"node {k} output {j} = {node.output[j]!r}"


def node_attribute(model, rng):
    from onnx import AttributeProto

    k, node = _node(model, rng)
    attrs = list(node.attribute)
    if not attrs or rng.random() < 0.2:
        name = rng.choice(("kernel_shape", "strides", "pads", "dilations", "group", "axis", "perm", "auto_pad"))
        attr = node.attribute.add()
        attr.name = name
        if name in ("group", "axis"):
            attr.type, attr.i = AttributeProto.INT, rng.choice(INT_EDGES)
        elif name == "auto_pad":
            attr.type, attr.s = AttributeProto.STRING, rng.choice((b"SAME_UPPER", b"VALID", b"BOGUS"))
        else:
            attr.type = AttributeProto.INTS
            attr.ints.extend(rng.choice(INT_EDGES) for _ in range(rng.randint(0, 5)))
        return f"node {k} gains attribute {name}"
    attr = rng.choice(attrs)
    if attr.type == AttributeProto.INT:
        attr.i = rng.choice(INT_EDGES)
    elif attr.type == AttributeProto.INTS and len(attr.ints):
        if rng.random() < 0.3:
            del attr.ints[rng.randrange(len(attr.ints))]
        else:
            attr.ints[rng.randrange(len(attr.ints))] = rng.choice(INT_EDGES)
    elif attr.type == AttributeProto.FLOAT:
        attr.f = rng.choice((0.0, -1.0, float("nan"), float("inf"), 1e30))
    elif attr.type == AttributeProto.STRING:
        attr.s = rng.choice((b"", b"\xff\xfe", b"BOGUS"))
    else:
        node.attribute.remove(attr)
        return f"node {k} loses attribute {attr.name}"
    return f"node {k} attribute {attr.name} mutated"


def node_delete(model, rng):
    k, _ = _node(model, rng)
    del model.graph.node[k]
    return f"node {k} deleted"


def node_swap(model, rng):
    nodes = model.graph.node
    a, b = rng.randrange(len(nodes)), rng.randrange(len(nodes))
    na, nb = type(nodes[a])(), type(nodes[b])()
    na.CopyFrom(nodes[a])
    nb.CopyFrom(nodes[b])
    nodes[a].CopyFrom(nb)
    nodes[b].CopyFrom(na)
    return f"nodes {a} and {b} swapped"


def init_dims(model, rng):
    init = rng.choice(model.graph.initializer)
    dims = list(init.dims)
    if dims and rng.random() < 0.6:
        dims[rng.randrange(len(dims))] = rng.choice((0, -1, 1, 2, 3, 2**20, 2**31 - 1, 2**40))
    elif dims and rng.random() < 0.5:
        del dims[rng.randrange(len(dims))]
    else:
        dims.append(rng.choice((1, 2, 1000)))
    del init.dims[:]
    init.dims.extend(dims)
    return f"initializer {init.name!r} dims = {dims}"


def init_data(model, rng):
    init = rng.choice(model.graph.initializer)
    if init.raw_data:
        init.raw_data = init.raw_data[: rng.randrange(len(init.raw_data))]
        return f"initializer {init.name!r} raw data cut to {len(init.raw_data)}"
    init.raw_data = b"\x00" * rng.choice((1, 3, 7))
    return f"initializer {init.name!r} gets {len(init.raw_data)} raw bytes"


def init_type(model, rng):
    init = rng.choice(model.graph.initializer)
    init.data_type = rng.choice((0, 1, 2, 3, 6, 7, 8, 10, 11, 16, 17, 99))
    return f"initializer {init.name!r} type = {init.data_type}"


def init_external(model, rng):
    from onnx import TensorProto

    init = rng.choice(model.graph.initializer)
    init.data_location = TensorProto.EXTERNAL
    entry = init.external_data.add()
    entry.key, entry.value = "location", rng.choice(("../../../etc/passwd", "/etc/hostname", "missing.bin",
                                                      "weights.bin", "\x00odd"))
    return f"initializer {init.name!r} external at {entry.value!r}"


def io_type(model, rng):
    value = rng.choice([*model.graph.input, *model.graph.output])
    value.type.tensor_type.elem_type = rng.choice((0, 1, 2, 3, 7, 8, 9, 10, 11, 16, 99))
    return f"graph value {value.name!r} type = {value.type.tensor_type.elem_type}"


def io_shape(model, rng):
    value = rng.choice([*model.graph.input, *model.graph.output])
    dims = value.type.tensor_type.shape.dim
    if not len(dims):
        dims.add().dim_value = 1
    dim = dims[rng.randrange(len(dims))]
    choice = rng.randrange(4)
    if choice == 0:
        dim.dim_param = rng.choice(("N", "H", "W"))
    elif choice == 1:
        dim.dim_value = rng.choice((0, 1, 2, 3, 100000, 2**31 - 1))
    elif choice == 2:
        dims.add().dim_value = rng.choice((1, 2))
    else:
        del dims[rng.randrange(len(dims))]
    return f"graph value {value.name!r} shape mutated"


def opset(model, rng):
    entry = rng.choice(model.opset_import)
    entry.version = rng.choice((1, 6, 7, 11, 13, 19, 21, 23, 99))
    return f"opset {entry.domain!r} = {entry.version}"


def ir_version(model, rng):
    model.ir_version = rng.choice((0, 3, 4, 7, 10, 13, 14, 99))
    return f"ir_version = {model.ir_version}"


def drop_graph_output(model, rng):
    outs = model.graph.output
    del outs[rng.randrange(len(outs))]
    return "graph output removed"


_MUTATORS = (
    node_op_type, node_input, node_input, node_drop_input, node_add_input, node_output, node_attribute,
    node_attribute, node_attribute, node_delete, node_swap, init_dims, init_dims, init_data, init_type,
    init_external, io_type, io_shape, io_shape, opset, ir_version, drop_graph_output,
)
