"""Native log lines that runtimes write straight to file descriptor 2, kept from the user.

LiteRT prints "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." from C++ on the first interpreter of a
process, whatever TF_CPP_MIN_LOG_LEVEL says, and its Python package has no switch for it. So that first
interpreter is made inside ``filtered_native_stderr``, which captures fd 2 for that moment and passes on every
other line (another thread's output written meanwhile is delayed, not lost).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable

NATIVE_NOISE = ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",)
# ONNX Runtime's own log (red on a terminal): its errors come back as the exception edgeaccel reports, and its
# warnings are about graph internals (one line per initializer listed as an input in an IR 3 model). The
# command line's --debug shows them (SHOW_RUNTIME_LOGS).
ORT_LOG = re.compile(r"\[[EW]:onnxruntime:")
SHOW_RUNTIME_LOGS = [False]


def is_native_noise(line: str) -> bool:
    return line in NATIVE_NOISE


def is_quiet_noise(line: str) -> bool:
    """The XNNPACK line, and ONNX Runtime's log unless SHOW_RUNTIME_LOGS."""
    return line in NATIVE_NOISE or (not SHOW_RUNTIME_LOGS[0] and bool(ORT_LOG.search(line)))


@contextlib.contextmanager
def quiet_native_stderr(is_noise: Callable[[str], bool] | None = None):
    """Capture what native code writes to fd 2 while loading, and pass on all but the known noise
    (``is_quiet_noise`` by default): what the command line and the server wrap loads in."""
    with filtered_native_stderr(is_noise or is_quiet_noise):
        yield


@contextlib.contextmanager
def filtered_native_stderr(is_noise: Callable[[str], bool] = is_native_noise):
    """Capture what native code writes to fd 2 inside the block and pass on all but ``is_noise(line)``."""
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 (embedded interpreters): nothing to filter
        yield
        return
    with _capture_file() as capture:
        sys.stderr.flush()
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            for line in capture.read().decode("utf-8", "replace").splitlines():
                if line.strip() and not is_noise(line.strip()):
                    print(line, file=sys.stderr)


def _capture_file():
    """An anonymous file for captured output: memfd on Linux (no tempfile module, no disk), else a temp file."""
    if hasattr(os, "memfd_create"):
        try:
            return os.fdopen(os.memfd_create("edgeaccel-stderr"), "w+b")
        except OSError:
            pass
    import tempfile

    return tempfile.TemporaryFile()
