"""Normalization and labels from a float TFLite model's own metadata (TFLITE_METADATA: NormalizationOptions
mean/std, a label file packed in the model's zip tail), as TF Hub's and Model Maker's models carry them."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from tflite_edit import edit, one_op_model

import edgeaccel
from edgeaccel.modelfiles.metadata import tflite_normalization


def channel_means(target):
    """A float image model: input [1, 16, 16, 3] -> MEAN over height and width -> [1, 3], one 'score' per channel,
    so the scores show exactly what the model was fed."""
    tensors = [("image", [1, 16, 16, 3], "FLOAT32", None), ("axes", [2], "INT32", np.array([1, 2], np.int32)),
               ("scores", [1, 3], "FLOAT32", None)]

    def options(schema):
        reducer = schema.ReducerOptionsT()
        reducer.keepDims = False
        return "ReducerOptions", reducer

    return one_op_model(target, "MEAN", tensors, [0, 1], [2], [0], [2], options=options)


def metadata_buffer(mean, std) -> bytes:
    """ModelMetadata { subgraph_metadata: [{ input_tensor_metadata: [{ process_units: [NormalizationOptions] }] }] }"""
    import flatbuffers

    b = flatbuffers.Builder(0)
    means = b.CreateNumpyVector(np.asarray(mean, np.float32))
    stds = b.CreateNumpyVector(np.asarray(std, np.float32))
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, means, 0)
    b.PrependUOffsetTRelativeSlot(1, stds, 0)
    norm = b.EndObject()
    b.StartObject(2)
    b.PrependUint8Slot(0, 1, 0)  # options_type: NormalizationOptions
    b.PrependUOffsetTRelativeSlot(1, norm, 0)
    unit = b.EndObject()

    def vector(*items):
        b.StartVector(4, len(items), 4)
        for item in reversed(items):
            b.PrependUOffsetTRelative(item)
        return b.EndVector()

    units = vector(unit)
    b.StartObject(7)
    b.PrependUOffsetTRelativeSlot(4, units, 0)
    tensor = b.EndObject()
    tensors = vector(tensor)
    b.StartObject(9)
    b.PrependUOffsetTRelativeSlot(2, tensors, 0)
    subgraph = b.EndObject()
    subgraphs = vector(subgraph)
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(3, subgraphs, 0)
    b.Finish(b.EndObject(), file_identifier=b"M001")
    return bytes(b.Output())


def with_metadata(source, target, mean, std, labels: str | None = None):
    data = metadata_buffer(mean, std)

    def change(model, schema):
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(data, np.uint8)
        model.buffers.append(buffer)
        entry = schema.MetadataT()
        entry.name, entry.buffer = b"TFLITE_METADATA", len(model.buffers) - 1
        model.metadata = [entry]

    edit(source, target, change)
    if labels is not None:  # associated files ride in a zip appended to the flatbuffer
        tail = io.BytesIO()
        with zipfile.ZipFile(tail, "w") as archive:
            archive.writestr("labelmap.txt", labels)
        target.write_bytes(target.read_bytes() + tail.getvalue())
    return target


def test_metadata_normalization_feeds_the_model_what_it_was_trained_on(tmp_path):
    plain = channel_means(tmp_path / "plain.tflite")
    tagged = with_metadata(plain, tmp_path / "tagged.tflite", [127.5] * 3, [127.5] * 3, labels="red\ngreen\nblue\n")
    assert tflite_normalization(tagged) == ((127.5,) * 3, (127.5,) * 3)
    assert tflite_normalization(plain) is None
    image = np.zeros((16, 16, 3), np.uint8)
    image[..., 2] = 255
    with edgeaccel.load(tagged, task="classify") as model:
        assert "mean (127.5, 127.5, 127.5)" in model.task.reason
        result = model.predict(image)
    scores = {c.label: round(c.score, 4) for c in result.classes}
    assert scores == {"red": -1.0, "green": -1.0, "blue": 1.0}  # -1..1, not the 0..1 default
    assert result.probabilities is False
    with edgeaccel.load(plain, task="classify") as model:
        assert {c.class_id: round(c.score, 4) for c in model.predict(image).classes} == {0: 0.0, 1: 0.0, 2: 1.0}


def test_user_normalization_wins_over_the_metadata(tmp_path):
    tagged = with_metadata(channel_means(tmp_path / "plain.tflite"), tmp_path / "tagged.tflite", [0] * 3, [1] * 3)
    with edgeaccel.load(tagged, task="classify", task_options={"normalize": "0,1"}) as model:
        result = model.predict(np.full((16, 16, 3), 255, np.uint8))
    assert [round(c.score, 4) for c in result.classes] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("garbage", [b"", b"\x00" * 12, b"not a flatbuffer at all"])
def test_garbage_metadata_means_none(tmp_path, garbage):
    plain = channel_means(tmp_path / "plain.tflite")

    def change(model, schema):
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(garbage, np.uint8) if garbage else None
        model.buffers.append(buffer)
        entry = schema.MetadataT()
        entry.name, entry.buffer = b"TFLITE_METADATA", len(model.buffers) - 1
        model.metadata = [entry]

    assert tflite_normalization(edit(plain, tmp_path / "bad.tflite", change)) is None
