"""Edit a real .tflite through LiteRT's own object API (ModelT) and write the result: how the validation
tests build the exact broken files that crashed a runtime."""

from __future__ import annotations

from pathlib import Path


def edit(source: Path, target: Path, change) -> Path:
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(source.read_bytes(), 0)
    change(model, schema)
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    target.write_bytes(bytes(builder.Output()))
    return target


def opcode_of(model, op) -> int:
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def first_op(model, builtin: int):
    """(subgraph, operator) of the first operator with builtin code ``builtin``."""
    sg = model.subgraphs[0]
    return sg, next(op for op in sg.operators if opcode_of(model, op) == builtin)


def one_op_model(target: Path, builtin: str, tensors, op_inputs, op_outputs, inputs, outputs,
                 options=None, signature=None) -> Path:
    """A model of one builtin operator built from nothing with LiteRT's schema object API.

    tensors: (name, shape, type name, constant data or None[, shape signature]), each with its own buffer;
    options: a function of the schema module giving (BuiltinOptions name, options object), or None;
    signature: ({input name: tensor}, {output name: tensor}) for a 'serving_default' SignatureDef."""
    import flatbuffers
    import numpy as np
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT()
    model.version = 3
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = getattr(schema.BuiltinOperator, builtin)
    code.version = 1
    model.operatorCodes = [code]
    model.buffers = [schema.BufferT()]
    sg = schema.SubGraphT()
    sg.tensors = []
    for name, shape, type_name, data, *shape_signature in tensors:
        t = schema.TensorT()
        t.name, t.shape, t.type = name.encode(), shape, getattr(schema.TensorType, type_name)
        t.shapeSignature = shape_signature[0] if shape_signature else None
        b = schema.BufferT()
        b.data = None if data is None else np.frombuffer(np.asarray(data).tobytes(), np.uint8)
        t.buffer = len(model.buffers)
        model.buffers.append(b)
        sg.tensors.append(t)
    sg.inputs, sg.outputs = inputs, outputs
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, op_inputs, op_outputs
    if options:
        kind, op.builtinOptions = options(schema)
        op.builtinOptionsType = getattr(schema.BuiltinOptions, kind)
    sg.operators = [op]
    model.subgraphs = [sg]
    if signature:
        def tensor_map(name, index):
            m = schema.TensorMapT()
            m.name, m.tensorIndex = name.encode(), index
            return m

        sig = schema.SignatureDefT()
        sig.signatureKey, sig.subgraphIndex = b"serving_default", 0
        sig.inputs = [tensor_map(k, v) for k, v in signature[0].items()]
        sig.outputs = [tensor_map(k, v) for k, v in signature[1].items()]
        model.signatureDefs = [sig]
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    target.write_bytes(bytes(builder.Output()))
    return target


def float_fc(target: Path, bias: bool = True) -> Path:
    """A float32 FULLY_CONNECTED model built from nothing: input [1,4] -> output [1,3], weights = arange.
    Without ``bias`` the op's input 2 is -1, which LiteRT's float kernel reads as optional."""
    import numpy as np

    weights = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    tensors = [("x", [1, 4], "FLOAT32", None), ("w", [3, 4], "FLOAT32", weights),
               ("b", [3], "FLOAT32", np.array([1.0, -1.0, 0.5], np.float32)), ("y", [1, 3], "FLOAT32", None)]
    return one_op_model(target, "FULLY_CONNECTED", tensors, [0, 1, 2 if bias else -1], [3], [0], [3],
                        options=lambda schema: ("FullyConnectedOptions", schema.FullyConnectedOptionsT()))
