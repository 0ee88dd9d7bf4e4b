"""The names a user types for executors (--executor): case-insensitive, with the aliases people use.

An unknown name is a usage error (exit 2) that lists the valid ones, raised while the arguments are parsed.
"""

from __future__ import annotations

import argparse

# alias -> runtime name: the file format people name the runtime after, and the usual abbreviations.
ALIASES = {"tflite": "litert", "tensorflow-lite": "litert", "tensorflowlite": "litert", "lite-rt": "litert",
           "ort": "onnxruntime", "onnx": "onnxruntime", "onnx-runtime": "onnxruntime",
           "ov": "openvino", "tf": "tensorflow"}

SHOWN_ALIASES = ("tflite", "ort", "ov", "tf")


def resolve_executor(name: str, known: list[str] | None = None) -> str:
    """The runtime name for what was typed ("LiteRT", "tflite", "ORT" ...); ValueError listing the valid ones."""
    if known is None:
        from ..executors.registry import runtimes

        known = list(runtimes())
    typed = name.strip()
    folded = typed.lower().replace("_", "-").replace(" ", "-")
    exact = [k for k in known if k.lower() == folded]
    if exact:
        return exact[0]
    alias = ALIASES.get(folded)
    if alias in known:
        return alias
    prefix = [k for k in known if k.lower().startswith(folded)] if len(folded) >= 3 else []
    if len(prefix) == 1:
        return prefix[0]
    aliases = ", ".join(f"{a}={ALIASES[a]}" for a in SHOWN_ALIASES if ALIASES[a] in known)
    raise ValueError(f"unknown executor {typed!r}; choose one of {', '.join(known)} (case-insensitive; also {aliases})")


def executor_arg(text: str) -> str:
    """argparse ``type=`` for --executor: a wrong name becomes argparse's usage error, exit 2."""
    try:
        return resolve_executor(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
