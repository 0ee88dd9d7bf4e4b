"""How the command line shows an error: the real problem first, in a few lines, then what to do.

A NoExecutorError carries one reason per candidate (runtime x device x artifact); most of them only say
"not the device asked for" or "does not read this format". Those are counted, not listed, so that the reason
that matters (the asked device is absent, a measurement from `edgeaccel tune` refused the candidate, a custom
op) is what the user reads first.
"""

from __future__ import annotations

import re

MAX_REASONS = 6
MAX_LINE = 300  # a runtime message can be one 17 kB line (ORT lists every missing input)

# Reasons that only say a candidate was never in question.
_ROUTINE = re.compile(r"not the (device|executor|runtime) asked for|does not read |runs edgetpu-tflite only"
                      r"|a meta-device, used only when asked")


def short(text: str, limit: int = MAX_LINE) -> str:
    """The first line of ``text``, cut to ``limit`` characters."""
    lines = [line.rstrip() for line in (text or "").splitlines() if line.strip()]
    line = lines[0] if lines else ""
    if len(line) <= limit:
        return line
    tail = f" ... ({len(line)} chars)"
    return line[: limit - len(tail)] + tail


def error_lines(exc, args=None) -> list[str]:
    """``error: ...`` and ``hint: ...`` lines for an EdgeAccelError."""
    from ..errors import NoExecutorError

    if isinstance(exc, NoExecutorError) and exc.rejections:
        return _no_executor(exc, args)
    lines = [f"error: {_cut_lines(exc.message)}"]
    if exc.hint:
        lines.append(f"hint: {exc.hint}")
    return lines


def _cut_lines(message: str, keep: int = 12) -> str:
    lines = [short(line) for line in message.splitlines() if line.strip()] or [""]
    if len(lines) > keep:
        lines = lines[:keep] + [f"  ... ({len(lines) - keep} more lines; run with --debug for all)"]
    return "\n".join(lines)


def _no_executor(exc, args) -> list[str]:
    head = exc.message.splitlines()[0]
    telling = {k: v for k, v in exc.rejections.items() if _telling(k, v, args)}
    if not telling:  # nothing stands out: the first few are the answer
        telling = dict(list(exc.rejections.items())[:MAX_REASONS])
    routine = len(exc.rejections) - len(telling)
    lines = [f"error: {head}"]
    groups = _grouped(telling)
    for name, why in groups[:MAX_REASONS]:
        lines.append(f"  - {name}: {short(why, 240)}")
    more = len(groups) - MAX_REASONS
    tail = []
    if more > 0:
        tail.append(f"{more} more")
    if routine:
        tail.append(f"{routine} candidates not in question (another device, executor or format)")
    if tail:
        lines.append(f"  ({'; '.join(tail)}: `edgeaccel explain MODEL` lists every one)")
    lines.append(f"hint: {_hint(exc, telling, args)}")
    return lines


def _grouped(reasons: dict[str, str]) -> list[tuple[str, str]]:
    """Candidates of one runtime and artifact with one reason on one line: "onnxruntime:CPU,CUDA [m.tflite]"."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for candidate, why in reasons.items():
        head, _, artifact = candidate.partition(" ")
        runtime, _, device = head.partition(":")
        groups.setdefault((runtime, artifact, why), []).append(device)
    return [(f"{runtime}:{','.join(devices)} {artifact}".rstrip(), why)
            for (runtime, artifact, why), devices in groups.items()]


def _telling(candidate: str, why: str, args) -> bool:
    """Whether a rejection says something: not one of the routine reasons, unless it concerns the runtime or
    device the user pinned ("onnxruntime does not read tflite" is the answer to --executor onnxruntime)."""
    if "asked for" in why:
        return False
    runtime, _, device = candidate.split(" ")[0].partition(":")
    if getattr(args, "executor", None) == runtime:
        return True
    pinned_device = (getattr(args, "device", None) or "\0").lower() == device.split("@")[0].lower()
    return (pinned_device and "does not read" not in why) or not _ROUTINE.search(why)


def _hint(exc, telling: dict[str, str], args) -> str:
    reasons = list(telling.values())
    if reasons and all(r.startswith("calibration:") for r in reasons):
        return ("these candidates were refused by measurements kept from an earlier `edgeaccel tune` (or "
                "calibrate=True); run with --no-cache to ignore them, or `edgeaccel cache clear --calibration`")
    device = getattr(args, "device", None)
    executor = getattr(args, "executor", None)
    if device or executor:
        pinned = " and ".join(f"--{k} {v}" for k, v in (("executor", executor), ("device", device)) if v)
        return (f"{pinned} cannot be used here (reasons above; `edgeaccel probe` shows what this machine has); "
                "drop it to let edgeaccel choose")
    return exc.hint or "install the runtime named in a fix above, or pass another model format"
