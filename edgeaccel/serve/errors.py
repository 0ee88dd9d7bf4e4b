"""One error type for both protocols: an HTTP status and the gRPC status code that says the same thing.

Every failure a client can cause or meet becomes a ServeError with a message that says what was wrong and
what to do (the hint of an edgeaccel error is kept); nothing reaches a client as a traceback."""

from __future__ import annotations

from ..errors import (DeadlineExceededError, EdgeAccelError, InferenceTimeoutError, InputError, ModelClosedError,
                      ModelError, NoExecutorError, OverloadedError)

# HTTP status -> grpc.StatusCode name (grpc is imported only by the gRPC side)
GRPC_CODE = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 409: "FAILED_PRECONDITION",
             413: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 501: "UNIMPLEMENTED", 503: "UNAVAILABLE",
             504: "DEADLINE_EXCEEDED"}


class ServeError(Exception):
    """A request the server answers with an error: ``status`` (HTTP), ``message`` for the client, and
    ``retry_after`` seconds for a 503 (the queue was full)."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.close_connection = False

    @property
    def grpc_code(self) -> str:
        return GRPC_CODE.get(self.status, "UNKNOWN")


def from_edgeaccel(exc: BaseException, model: str = "") -> ServeError:
    """The ServeError for an error a model raised while taking or running a request."""
    if isinstance(exc, ServeError):
        return exc
    text = exc.message if isinstance(exc, EdgeAccelError) else f"{type(exc).__name__}: {exc}"
    hint = getattr(exc, "hint", None)
    if hint:
        text = f"{text} (hint: {hint})"
    where = f"model '{model}': " if model else ""
    if isinstance(exc, InputError):
        return ServeError(400, where + text)
    if isinstance(exc, OverloadedError):
        return ServeError(503, where + text, retry_after=1)
    if isinstance(exc, (DeadlineExceededError, InferenceTimeoutError)):
        return ServeError(504, where + text)
    if isinstance(exc, ModelClosedError):
        return ServeError(503, where + "the model was unloaded while this request waited; load it again",
                          retry_after=1)
    if isinstance(exc, (ModelError, NoExecutorError)):
        return ServeError(409, where + text)
    return ServeError(500, where + text)
