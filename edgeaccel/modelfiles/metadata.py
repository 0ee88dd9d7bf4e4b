"""What a TFLite model's own metadata (the TFLITE_METADATA buffer, metadata_schema.fbs) says about its image
input: the normalization (mean and std per channel) the model was trained with. Read with edgeaccel's
bounds-checked flatbuffer reader; a model without metadata, or with metadata this does not understand, has
none (the caller falls back to its default and says so)."""

from __future__ import annotations

from pathlib import Path

from ..formats import flatbuf

_NORMALIZATION_OPTIONS = 1  # ProcessUnitOptions union: NormalizationOptions


def tflite_normalization(path: str | Path, which: int = 0) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """(mean, std) of input ``which``'s NormalizationOptions: the model takes (pixel - mean) / std."""
    try:
        buf = Path(path).read_bytes()
        model = flatbuf.root(buf)
        for entry in model.tables(6):  # Model.metadata: [Metadata {name, buffer}]
            if entry.string(0) != "TFLITE_METADATA":
                continue
            buffers = model.tables(4)  # Model.buffers: [Buffer {data, offset, size}]
            index = entry.scalar(1, "I")
            if index >= len(buffers):
                return None
            data = buffers[index]
            start, n = data.vector_span(0, 1)
            if not n and data.scalar(1, "Q"):  # a model over 2 GB keeps buffers after the flatbuffer
                start, n = data.scalar(1, "Q"), data.scalar(2, "Q")
            if not n:
                return None
            meta = flatbuf.root(bytes(buf[start:start + n]))
            subgraphs = meta.tables(3)  # ModelMetadata.subgraph_metadata
            inputs = subgraphs[0].tables(2) if subgraphs else []  # SubGraphMetadata.input_tensor_metadata
            if which >= len(inputs):
                return None
            for unit in inputs[which].tables(4):  # TensorMetadata.process_units
                if unit.scalar(0, "B") == _NORMALIZATION_OPTIONS:
                    options = unit.table(1)
                    if options is None:
                        continue
                    mean = tuple(float(v) for v in options.numbers(0, "<f4"))
                    std = tuple(float(v) for v in options.numbers(1, "<f4"))
                    if mean and std and all(s != 0 for s in std):
                        return mean, std
    except (OSError, flatbuf.FlatBufferError, IndexError, ValueError):
        return None
    return None
