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


def float_fc(target: Path, bias: bool = True) -> Path:
    """A float32 FULLY_CONNECTED model built from nothing: input [1,4] -> output [1,3], weights = arange.
    Without ``bias`` the op's input 2 is -1, which LiteRT's float kernel reads as optional."""
    import flatbuffers
    import numpy as np
    from ai_edge_litert import schema_py_generated as schema

    def tensor(name, shape, buffer):
        t = schema.TensorT()
        t.name, t.shape, t.type, t.buffer = name.encode(), shape, schema.TensorType.FLOAT32, buffer
        return t

    def buffer(data=None):
        b = schema.BufferT()
        b.data = None if data is None else np.frombuffer(data.astype(np.float32).tobytes(), np.uint8)
        return b

    model = schema.ModelT()
    model.version = 3
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.FULLY_CONNECTED
    code.version = 1
    model.operatorCodes = [code]
    weights = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    model.buffers = [buffer(), buffer(weights), buffer(np.array([1.0, -1.0, 0.5])), buffer(), buffer()]
    sg = schema.SubGraphT()
    sg.tensors = [tensor("x", [1, 4], 3), tensor("w", [3, 4], 1), tensor("b", [3], 2), tensor("y", [1, 3], 4)]
    sg.inputs, sg.outputs = [0], [3]
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0, 1, 2 if bias else -1], [3]
    op.builtinOptionsType = schema.BuiltinOptions.FullyConnectedOptions
    op.builtinOptions = schema.FullyConnectedOptionsT()
    sg.operators = [op]
    model.subgraphs = [sg]
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    target.write_bytes(bytes(builder.Output()))
    return target
