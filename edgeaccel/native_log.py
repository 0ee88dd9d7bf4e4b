"""Native log lines that runtimes write straight to file descriptor 2, kept from the user.

LiteRT prints "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." from C++ on the first interpreter of a
process, whatever TF_CPP_MIN_LOG_LEVEL says, and its Python package has no switch for it. So that first
interpreter is made inside ``filtered_native_stderr``, which captures fd 2 for that moment and passes on every
other line (another thread's output written meanwhile is delayed, not lost).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable

NATIVE_NOISE = ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",)


def is_native_noise(line: str) -> bool:
    return line in NATIVE_NOISE


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
