"""The one place where a runtime's exceptions become edgeaccel errors.

Each executor class declares ``error_rules``: a small table of ``ErrorRule`` (what the runtime's message says ->
which edgeaccel error, with what hint). ``translate`` applies the class's rules, then the rules every runtime
shares (out of memory, an index out of range), then the default for the stage: ``ModelLoadError`` while
loading, ``InferenceError`` while running. The runtime's own text is always kept in the message.

    try:
        session = ort.InferenceSession(...)
    except Exception as exc:
        raise translate(type(self), exc, "load", model, device) from exc
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import (
    MEMORY_HINT,
    EdgeAccelError,
    ExecutorError,
    InferenceError,
    ModelLoadError,
    looks_out_of_memory,
    looks_out_of_range,
    out_of_range_error,
    runtime_message,
)

if TYPE_CHECKING:
    from ..modelinfo import ModelInfo
    from .executor_options import ExecutorOptions

STAGES = ("load", "describe", "run")


@dataclass(frozen=True)
class Failure:
    """What a rule sees: the runtime's cleaned message and where it happened."""

    message: str
    stage: str
    runtime: str  # the class's ``label``: "ONNX Runtime"
    runtime_id: str  # the registry's name: "onnxruntime"
    model: ModelInfo | None
    device: str
    exc: BaseException
    options: ExecutorOptions | None = None  # what the executor was loaded with (a rule may name a limit)

    @property
    def name(self) -> str:
        return self.model.path.name if self.model is not None else "the model"


@dataclass(frozen=True)
class ErrorRule:
    """``error`` when the runtime's message contains any of ``contains`` (or ``when`` holds) at one of ``stages``.

    ``message`` is a format string over Failure's fields ("{runtime} cannot convert {name}: {message}");
    ``hint`` says what to do, or is a function of the Failure for hints that depend on it.
    """

    error: type[EdgeAccelError]
    contains: tuple[str, ...] = ()
    stages: tuple[str, ...] = ("load",)
    message: str | Callable[[Failure], str] = "{runtime} failed to {verb} {name}: {message}"
    hint: str | Callable[[Failure], str | None] | None = None
    when: Callable[[Failure], bool] | None = None

    def matches(self, failure: Failure) -> bool:
        if failure.stage not in self.stages:
            return False
        if self.when is not None and not self.when(failure):
            return False
        return not self.contains or any(text in failure.message for text in self.contains)

    def build(self, failure: Failure) -> EdgeAccelError:
        text = self.message(failure) if callable(self.message) else self.message.format(
            runtime=failure.runtime, name=failure.name, message=failure.message, device=failure.device,
            verb=_VERB[failure.stage])
        hint = self.hint(failure) if callable(self.hint) else self.hint
        if issubclass(self.error, ExecutorError):
            return self.error(text, runtime=failure.runtime_id, hint=hint)
        return self.error(text, hint=hint)


_VERB = {"load": "load", "describe": "describe the tensors of", "run": "run"}
DESCRIBE_HINT = "the model's tensor names are corrupted; export it again"


def translate(cls: type, exc: BaseException, stage: str, model: ModelInfo | None = None,
              device: str = "CPU", options: ExecutorOptions | None = None) -> EdgeAccelError:
    """The edgeaccel error for ``exc`` raised by ``cls``'s runtime at ``stage`` ("load", "describe", "run")."""
    if isinstance(exc, EdgeAccelError):
        return exc
    clean = getattr(cls, "clean_message", None)
    message = runtime_message(exc)
    message = clean(message) if clean is not None else message
    failure = Failure(message, stage, getattr(cls, "label", cls.runtime), cls.runtime, model, device, exc, options)
    for rule in getattr(cls, "error_rules", ()):
        if rule.matches(failure):
            return rule.build(failure)
    if stage == "run" and looks_out_of_range(message):
        return out_of_range_error(failure.runtime, failure.name, message)
    hint = MEMORY_HINT if looks_out_of_memory(exc) or looks_out_of_memory(message) else None
    if stage == "run":
        return InferenceError(f"{failure.runtime} failed to run {failure.name}: {message}", runtime=cls.runtime,
                              hint=hint)
    if stage == "describe":
        return ModelLoadError(f"{failure.runtime} loaded {failure.name} but cannot describe its tensors: {message}",
                              runtime=cls.runtime, hint=DESCRIBE_HINT)
    return ModelLoadError(f"{failure.runtime} failed to load {failure.name} on {device}: {message}",
                          runtime=cls.runtime, hint=hint or getattr(cls, "load_hint", None))
