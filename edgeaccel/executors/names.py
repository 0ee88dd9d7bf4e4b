"""The names people give executors: case-insensitive runtime names and the usual aliases ("ORT", "ov",
"tflite"). ``load(executor=...)``, ``profile --compare`` and the command line's --executor all resolve them
here, so a name that one accepts the others accept too."""

from __future__ import annotations

# alias -> runtime name: the file format people name the runtime after, and the usual abbreviations.
ALIASES = {"tflite": "litert", "tensorflow-lite": "litert", "tensorflowlite": "litert", "lite-rt": "litert",
           "ort": "onnxruntime", "onnx": "onnxruntime", "onnx-runtime": "onnxruntime",
           "ov": "openvino", "tf": "tensorflow"}

SHOWN_ALIASES = ("tflite", "ort", "ov", "tf")


def resolve_executor(name: str, known: list[str] | None = None) -> str:
    """The runtime name for what was typed ("LiteRT", "tflite", "ORT" ...); ValueError listing the valid ones."""
    if known is None:
        from .registry import runtimes

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
