"""Recurrent state: which outputs feed which inputs (declared or recognized), and how the carried state joins
the frame's inputs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from edgeaccel.modelinfo import TensorSpec
from edgeaccel.sources.errors import SourceError
from edgeaccel.sources.state import StateCarry, state_pairs, with_state

U8 = np.dtype(np.uint8)
F32 = np.dtype(np.float32)


def _model(inputs, outputs):
    return SimpleNamespace(inputs=[TensorSpec(n, s, d) for n, s, d in inputs],
                           outputs=[TensorSpec(n, s, d) for n, s, d in outputs])


GRU = _model([("image", (1, 64, 64, 3), U8), ("hidden_in", (1, 16), F32), ("prev_cell", (1, 16), F32)],
             [("scores", (1, 16), F32), ("cell_out", (1, 16), F32), ("hidden_out", (1, 16), F32)])


def test_state_is_recognized_by_name_and_shape_not_by_shape_alone():
    # "scores" has the state's shape but no matching name: it is not state
    assert state_pairs(GRU, None) == [(1, 2), (2, 1)]


def test_a_declared_state_must_name_an_output_and_an_input_of_one_shape():
    assert state_pairs(GRU, {"scores": "hidden_in"}) == [(0, 1)]
    with pytest.raises(SourceError, match="does not name"):
        state_pairs(GRU, {"cell": "prev_cell"})
    mismatched = _model([("image", (1, 8), U8), ("state_in", (1, 4), F32)], [("state_out", (1, 5), F32)])
    with pytest.raises(SourceError, match="cannot feed"):
        state_pairs(mismatched, {"state_out": "state_in"})
    assert state_pairs(mismatched, None) == []  # shapes differ: not recognized either


def test_the_carried_state_joins_the_frame_inputs_in_model_order():
    carry = StateCarry(GRU, state_pairs(GRU, None))
    assert all(not v.any() and v.shape == (1, 16) for v in carry.values.values())  # zeros first
    outputs = [np.full((1, 16), k, np.float32) for k in range(3)]
    carry.update(outputs)
    image = np.ones((1, 64, 64, 3), np.uint8)
    joined = with_state([image], carry.values, 3)
    assert joined[0] is image and joined[1][0, 0] == 2 and joined[2][0, 0] == 1  # hidden <- hidden_out, ...
    # a task layer that gives every input (its own zeros for the state) has them replaced by the carried state
    own = [image, np.zeros((1, 16), np.float32), np.zeros((1, 16), np.float32)]
    assert [a[0, 0] for a in with_state(own, carry.values, 3)[1:]] == [2, 1]
    carry.reset()
    assert not any(v.any() for v in carry.values.values())
