"""Recurrent state carried per source: a model whose outputs feed its inputs on the next frame (an LSTM's
c/h, as in traffic_model.tflite) keeps one state per source, starting from zeros.

Declared by the caller, ``state={"raw_outputs/lstm_c": "raw_inputs/init_lstm_c", ...}`` (output -> input), or
recognized: an output and an input with the same shape and dtype whose names are the same once the usual
prefixes are taken off (``raw_outputs/lstm_c`` ~ ``raw_inputs/init_lstm_c``, ``state_out`` ~ ``state_in``).
"""

from __future__ import annotations

import re

from .errors import SourceError

_DECORATION = re.compile(r"^(init(ial)?_|prev(ious)?_|in_|out_)|(_in|_out|_next|_prev|_init)$")


def _stem(name: str) -> str:
    last = name.rsplit("/", 1)[-1].rsplit(":", 1)[0].lower()
    while (stripped := _DECORATION.sub("", last)) != last:
        last = stripped
    return last


def state_pairs(model, declared: dict[str, str] | None) -> list[tuple[int, int]]:
    """(output index, input index) for every state the model carries; [] for a stateless model."""
    outputs, inputs = list(model.outputs), list(model.inputs)
    if isinstance(declared, dict):
        pairs = []
        out_names, in_names = [t.name for t in outputs], [t.name for t in inputs]
        for out_name, in_name in declared.items():
            if out_name not in out_names or in_name not in in_names:
                raise SourceError(f"state {out_name!r} -> {in_name!r} does not name an output and an input of the "
                                  f"model", hint=f"outputs: {out_names}; inputs: {in_names}")
            o, i = out_names.index(out_name), in_names.index(in_name)
            if tuple(outputs[o].shape) != tuple(inputs[i].shape):
                raise SourceError(f"state {out_name!r} {outputs[o].shape} cannot feed {in_name!r} {inputs[i].shape}",
                                  hint="a state output feeds an input of the same shape")
            pairs.append((o, i))
        return pairs
    pairs = []
    taken: set[int] = set()
    for o, out in enumerate(outputs):
        for i, inp in enumerate(inputs):
            if i in taken or not out.name or not inp.name or out.name == inp.name:
                continue
            if tuple(out.shape) == tuple(inp.shape) and out.dtype == inp.dtype and _stem(out.name) == _stem(inp.name):
                pairs.append((o, i))
                taken.add(i)
                break
    return pairs


class StateCarry:
    """The state of one source: the inputs the last frame's outputs give, zeros before the first frame."""

    def __init__(self, model, pairs: list[tuple[int, int]]) -> None:
        import numpy as np

        self.pairs = pairs
        self._inputs = list(model.inputs)
        self._zeros = {i: np.zeros(self._inputs[i].shape, self._inputs[i].dtype) for _, i in pairs}
        self.values = dict(self._zeros)

    def update(self, outputs) -> None:
        self.values = {i: outputs[o] for o, i in self.pairs}

    def reset(self) -> None:
        """Back to zeros: a frame failed, or the stream was cut and restarted (the old state is stale)."""
        self.values = dict(self._zeros)


def with_state(inputs: list, state: dict, count: int) -> list:
    """The model's ``count`` inputs in order: the frame's (by position among the non-state inputs) and the
    carried state. A task that gives every input has its state inputs replaced by the carried ones."""
    full: list = [None] * count
    for index, value in state.items():
        full[index] = value
    if len(inputs) == count:
        return [full[i] if full[i] is not None else inputs[i] for i in range(count)]
    free = [i for i in range(count) if full[i] is None]
    # strict=False: a frame with too few inputs leaves a None slot, which the model's input check names
    for i, value in zip(free, inputs, strict=False):
        full[i] = value
    return full
