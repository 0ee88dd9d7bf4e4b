"""ONNX -> TensorRT engine (``--to tensorrt-f16`` / ``tensorrt-int8``), built on this machine's NVIDIA GPU.

An engine runs only on the GPU architecture and the TensorRT version that built it, so it is built here, where
it will run, by the TensorRT executor's own builder (``executors.tensorrt_gpu.build_engine``). Where TensorRT, a
CUDA binding or the GPU is missing, the conversion is refused before any other work, with what is missing and
what installs it. int8 is built from the QDQ model edgeaccel's ONNX quantization makes (explicit quantization:
TensorRT takes the scales from the Q/DQ nodes), so no TensorRT calibrator is involved.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConversionError


def check_buildable() -> None:
    """ConversionError naming each missing piece when no engine can be built here."""
    from ..executors.tensorrt import TensorRTExecutor

    found = TensorRTExecutor.availability("TensorRT")
    if not found:
        raise ConversionError(f"tensorrt-f16 and tensorrt-int8 build an engine on this machine's NVIDIA GPU, and "
                              f"here {found.reason}",
                              hint=f"{found.fix or 'install TensorRT'}; or convert to onnx-float / onnx-int8 here and "
                              "build the engine on the GPU machine (trtexec --onnx=m.onnx --saveEngine=m.engine)")


def build(onnx_path: Path, dest: Path, precision: str) -> Path:
    """Build ``onnx_path`` into an engine at ``dest`` with ``precision`` ("f16" or "int8")."""
    from ..executors.tensorrt import _trt
    from ..executors.tensorrt_build import BuildOptions
    from ..executors.tensorrt_gpu import build_engine, collecting_logger

    trt = _trt()
    plan, _ = build_engine(trt, collecting_logger(trt), Path(onnx_path), BuildOptions(precision=precision))
    dest.write_bytes(plan)
    return dest
