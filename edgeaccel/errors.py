"""The one exception tree of edgeaccel.

Every class also inherits the builtin a caller would expect, so ``except ValueError`` keeps working around
code that used a raw runtime before::

    EdgeAccelError (Exception)
    ├── ModelError (ValueError)                 the model file itself is wrong or unusable
    │   ├── UnsupportedFormatError              not a format edgeaccel reads (sniffed from the bytes)
    │   ├── ModelValidationError                structurally broken: would crash or mislead a runtime
    │   └── UnsupportedModelError               valid, but nothing here can run it (custom op, Edge TPU body)
    ├── InputError (ValueError)                 what the caller passed to run() does not fit the model
    │   ├── InputCountError / InputNameError
    │   ├── InputShapeError
    │   ├── InputDTypeError (also TypeError)
    │   └── InputValueError                     NaN/Inf where the caller asked us to check
    ├── RuntimeNotInstalledError (ImportError)  the runtime's package is missing: names the pip extra
    ├── DeviceUnavailableError (RuntimeError)   the device or its driver/delegate is not usable here
    ├── ExecutorError (RuntimeError)            the runtime failed; keeps the runtime's own message
    │   ├── ModelLoadError                      while reading/compiling the model
    │   ├── AccuracyGuardError                  its answers disagree with the reference's: it serves nothing
    │   └── InferenceError                      while running it
    │       ├── OutputValueError                NaN/Inf in outputs where the caller asked us to check
    │       ├── WorkerCrashedError              an isolated worker died (signal, OOM); the caller lives on
    │       ├── OverloadedError                 a scheduled model's queue is full; the request was not taken
    │       └── InferenceTimeoutError (also TimeoutError)
    │           └── DeadlineExceededError       no executor could finish the request by its deadline
    ├── NoExecutorError (RuntimeError)          no candidate can run the model here; lists every reason
    ├── ModelClosedError (RuntimeError)         run() after close()
    ├── ConfigError (ValueError)                a profile/runtime YAML is wrong: names the file and key
    └── ConversionError (ValueError)            `edgeaccel convert` cannot make an artifact: names the op, the
                                                input or the calibration file, and what to do instead

Runtime exceptions are converted where an executor calls the runtime (``raise X(...) from exc``): the
runtime's text is kept and a hint says what to do about it.
"""

from __future__ import annotations


class EdgeAccelError(Exception):
    """Base of every error edgeaccel raises. ``hint`` says what the caller can do about it."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\n  hint: {hint}")


class ModelError(EdgeAccelError, ValueError):
    """The model file is wrong or unusable."""


class UnsupportedFormatError(ModelError):
    """The bytes are not a model format edgeaccel reads."""


class ModelValidationError(ModelError):
    """The model is structurally broken in a way that would crash or mislead a runtime."""


class UnsupportedModelError(ModelError):
    """The model is valid but no executor here can run it (custom ops, an Edge TPU compiled body, ...)."""


class InputError(EdgeAccelError, ValueError):
    """The inputs passed to ``run()`` do not fit the model."""


class InputCountError(InputError):
    pass


class InputNameError(InputError):
    pass


class InputShapeError(InputError):
    pass


class InputDTypeError(InputError, TypeError):
    pass


class InputValueError(InputError):
    pass


class RuntimeNotInstalledError(EdgeAccelError, ImportError):
    """The runtime's Python package is not installed; the hint names the pip extra."""


class DeviceUnavailableError(EdgeAccelError, RuntimeError):
    """The device, its driver or its delegate cannot be used here."""


class ExecutorError(EdgeAccelError, RuntimeError):
    """A runtime failed. ``runtime`` names it; the runtime's own message is kept in the text."""

    def __init__(self, message: str, *, runtime: str | None = None, hint: str | None = None) -> None:
        self.runtime = runtime
        super().__init__(message, hint=hint)


class ModelLoadError(ExecutorError):
    """The runtime could not read or compile the model."""


class AccuracyGuardError(ExecutorError):
    """An executor loaded but its answers on the guard's inputs disagree with the reference's
    (``edgeaccel.selection.guard``): no request is routed to it."""


class InferenceError(ExecutorError):
    """The runtime failed while running the model."""


class OutputValueError(InferenceError):
    """The outputs hold NaN or Inf and the caller asked for the check."""


class WorkerCrashedError(InferenceError):
    """An isolated worker process died; the caller's process is unharmed and a new worker will serve."""


class WorkerMemoryError(WorkerCrashedError, MemoryError):
    """An isolated worker went over its resident-memory limit (IsolationLimits.resident_bytes) and was killed."""


class GpuMemoryLimitError(ExecutorError, MemoryError):
    """The model did not fit in the GPU memory limit set at load (``gpu_mem_limit_mb``); the message names it."""


class InferenceTimeoutError(InferenceError, TimeoutError):
    """A run or load exceeded its time limit."""


class DeadlineExceededError(InferenceTimeoutError):
    """A scheduled request could not be finished by its deadline and was not run (or ran too late)."""


class OverloadedError(InferenceError):
    """A scheduled model's queue is full: requests arrive faster than its executors may serve them."""


class NoExecutorError(EdgeAccelError, RuntimeError):
    """No executor can run the model here. ``rejections`` maps each candidate to its reason."""

    def __init__(self, message: str, *, rejections: dict[str, str] | None = None, hint: str | None = None):
        self.rejections = dict(rejections or {})
        if self.rejections:
            message += "".join(f"\n  - {name}: {why}" for name, why in self.rejections.items())
        super().__init__(message, hint=hint)


class ModelClosedError(EdgeAccelError, RuntimeError):
    """The model was closed; load it again to run it."""


class ConfigError(EdgeAccelError, ValueError):
    """A profile or runtime descriptor is wrong. ``path`` and ``key`` say where."""

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None, hint: str | None = None):
        self.path = path
        self.key = key
        where = ":".join(str(p) for p in (path, key) if p)
        super().__init__(f"{where}: {message}" if where else message, hint=hint)


class ConversionError(EdgeAccelError, ValueError):
    """A model cannot be converted or quantized as asked (an op the target lacks, a dynamic shape where a static
    one is needed, calibration data that does not fit the model)."""


def runtime_message(exc: BaseException) -> str:
    """The runtime's own text for an exception, or its type when the runtime said nothing.

    LiteRT raises ``RuntimeError('')`` on some broken models; an empty message helps nobody.
    """
    try:
        text = str(exc).strip()
    except Exception:  # a runtime exception whose __str__ fails (bad bytes in a name)
        text = ""
    return text or f"{type(exc).__module__}.{type(exc).__name__} with no message"


# What runtimes say when an allocation failed (or, under an address-space limit, a thread's stack did):
# measured under RLIMIT_AS with LiteRT (RuntimeError with no message), ONNX Runtime and OpenVINO (also "failed
# to map segment from shared object" when a plugin library no longer fits).
_OUT_OF_MEMORY = ("bad_alloc", "memoryerror", "out of memory", "cannot allocate", "failed to allocate",
                  "resource temporarily unavailable", "cannot create thread", "failed to map segment",
                  "is smaller than requested bytes")  # ONNX Runtime's BFC arena at its memory limit
MEMORY_HINT = ("the runtime could not get memory: free memory, load fewer models at once, or raise the process's "
               "address-space limit (ulimit -v, or IsolationLimits(memory_bytes=...) for an isolated model)")


def looks_out_of_memory(exc: BaseException | str) -> bool:
    """True when a runtime's exception reads like a failed allocation rather than a broken model."""
    if isinstance(exc, MemoryError):
        return True
    text = exc if isinstance(exc, str) else f"{type(exc).__name__} {runtime_message(exc)}"
    return any(word in text.lower() for word in _OUT_OF_MEMORY)


# Kernel messages that mean the model's own computation went out of range on this input (an index it computed or
# read from a corrupted constant). Another runtime would get the same indices, and OpenVINO does not check them:
# measured, LiteRT's "gather_nd index out of bounds" followed by the run-time fallback to OpenVINO killed the
# process with SIGSEGV. Such an error is the model's, so it is raised as one and not handed to a fallback.
_OUT_OF_RANGE = ("index out of bounds", "indices_has_only_positive_elements", "out of data bounds",
                 "indices element out of")


def looks_out_of_range(message: str) -> bool:
    text = message.lower()
    return any(word in text for word in _OUT_OF_RANGE)


def out_of_range_error(runtime: str, name: str, message: str) -> ModelValidationError:
    return ModelValidationError(
        f"{runtime} stopped {name}: the model computed an index out of range on this input ({message})",
        hint="the model is corrupted, or not meant for inputs like this one; edgeaccel does not retry it on "
        "another runtime, which would read out of bounds",
    )
