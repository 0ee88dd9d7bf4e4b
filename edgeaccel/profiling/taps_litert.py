"""LiteRT tap: ``Interpreter(experimental_preserve_all_tensors=True)`` keeps every intermediate tensor after
``invoke``; ``get_tensor(i)`` reads each one, dequantized with that tensor's own scale and zero point (per-axis
too). The interpreter is made without the default XNNPACK delegate: a delegated partition computes its
intermediates inside the delegate, where LiteRT cannot show them. The builtin int8 kernels give the same
integers as XNNPACK's up to one step of rounding, so what is measured is the model's own quantization error.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import ModelLoadError, runtime_message
from ..modelinfo import ModelInfo
from .taps import Tap, TapTensor, as_float, dequantize

# The interpreter's own ops that only re-encode a value (int8 <-> float at the edges, or between scales)
_PASSTHROUGH = frozenset({"QUANTIZE", "DEQUANTIZE"})


class LiteRTTap(Tap):
    def __init__(self, info: ModelInfo) -> None:
        super().__init__("litert", info)
        from ..executors.base import default_threads
        from ..executors.litert import _first_interpreter_quietly, interpreter_module

        found = interpreter_module()
        if isinstance(found, str):
            raise ModelLoadError(f"LiteRT is not usable: {found}", runtime="litert", hint="pip install ai-edge-litert")
        module = found[0]
        kwargs = {"model_path": str(info.path), "num_threads": default_threads(),
                  "experimental_preserve_all_tensors": True}
        resolver = getattr(module, "OpResolverType", None)
        if resolver is not None:
            kwargs["experimental_op_resolver_type"] = resolver.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        try:
            with warnings.catch_warnings(), _first_interpreter_quietly():
                # "intended for debugging purposes only": that is what this is
                warnings.simplefilter("ignore", UserWarning)
                self._interpreter = module.Interpreter(**kwargs)
                self._interpreter.allocate_tensors()
            details = self._interpreter.get_tensor_details()
            ops = self._interpreter._get_ops_details()  # the op list; LiteRT has no public name for it
            self._input_index = [d["index"] for d in self._interpreter.get_input_details()]
        except Exception as exc:
            raise ModelLoadError(f"LiteRT cannot open {info.path.name} for capture: {runtime_message(exc)}",
                                 runtime="litert", hint="check that the model runs: edgeaccel run MODEL") from exc
        self._details = {d["index"]: d for d in details}
        self._build(ops)

    def _build(self, ops: list[dict]) -> None:
        # live: computed from the inputs. The rest are constants: weights, biases, shapes, and what ops make
        # from constants alone (the DEQUANTIZE of a float16 model's weights)
        live = set(self._input_index)
        for index in self._input_index:
            self.tensors.append(self._tensor(index, "input", (), False))
        for op in ops:
            if op["op_name"] == "DELEGATE":  # a delegate's node repeats the ops it took over
                continue
            reads = tuple(str(int(i)) for i in op["inputs"] if int(i) in live)
            if not reads:
                continue
            live.update(int(i) for i in op["outputs"])
            for index in op["outputs"]:
                self.tensors.append(self._tensor(int(index), op["op_name"], reads, op["op_name"] in _PASSTHROUGH))

    def _tensor(self, index: int, op_type: str, reads: tuple[str, ...], passthrough: bool) -> TapTensor:
        d = self._details[index]
        quantized = len(d["quantization_parameters"]["scales"]) > 0
        readable = np.dtype(d["dtype"]).kind == "f" or quantized
        return TapTensor(str(index), d["name"], op_type, tuple(int(x) for x in d["shape"]), reads, passthrough,
                         readable)

    def run(self, feeds: list[np.ndarray]) -> dict[str, np.ndarray]:
        it = self._interpreter
        for index, array in zip(self._input_index, feeds, strict=True):
            it.set_tensor(index, array)
        it.invoke()
        values = {}
        for t in self.tensors:
            if not t.readable:
                continue
            raw = it.get_tensor(int(t.id))
            q = self._details[int(t.id)]["quantization_parameters"]
            if len(q["scales"]):
                values[t.id] = dequantize(raw, q["scales"], q["zero_points"], q["quantized_dimension"])
            else:
                value = as_float(raw)
                if value is not None:
                    values[t.id] = value.copy()
        return values

    def close(self) -> None:
        self._interpreter = None
