"""Opening a tap: the capture of every layer's values (``taps.Tap``) by the runtime that reads the model.

Apart from ``taps.py`` (the tap's contract and the helpers every runtime's tap uses) because it imports those taps,
which import ``taps.py``.
"""

from __future__ import annotations

from ..errors import RuntimeNotInstalledError
from ..modelinfo import ModelInfo
from .taps import Tap

_EXTRAS = {"litert": "ai-edge-litert", "onnxruntime": "'edgeaccel[onnx]'", "openvino": "'edgeaccel[openvino]'"}


def open_tap(info: ModelInfo, runtime: str) -> Tap:
    try:
        if runtime == "litert":
            from .taps_litert import LiteRTTap

            return LiteRTTap(info)
        if runtime == "onnxruntime":
            from .taps_onnxruntime import OnnxRuntimeTap

            return OnnxRuntimeTap(info)
        from .taps_openvino import OpenVINOTap

        return OpenVINOTap(info)
    except RuntimeNotInstalledError:
        raise
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"reading the tensors of {info.path.name} needs {runtime} ({exc})",
                                       hint=f"pip install {_EXTRAS[runtime]}") from exc
