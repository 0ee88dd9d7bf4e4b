"""The command line: ``edgeaccel probe | run | ...``. The only layer that parses arguments or prints.

Errors become one clear line (and its hint) on stderr and an exit code; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys

from ..errors import (
    ConfigError,
    EdgeAccelError,
    ExecutorError,
    InputError,
    ModelError,
    NoExecutorError,
    RuntimeNotInstalledError,
)

# Exit codes, documented in the README.
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_MODEL, EXIT_INPUT, EXIT_RUNTIME, EXIT_NO_EXECUTOR, EXIT_CONFIG = range(8)
EXIT_INTERNAL = 70

# command -> module under edgeaccel.cli that defines add_arguments(parser) and main(args) -> int
COMMANDS = {
    "probe": "probe_cmd",
    "run": "run_cmd",
    "explain": "explain_cmd",
    "tune": "tune_cmd",
    "bench": "bench_cmd",
    "profiles": "profiles_cmd",
    "convert": "convert_cmd",
    "check": "check_cmd",
}


# Native log lines the runtimes write straight to fd 2 that tell a user nothing (LiteRT prints this one on
# its first interpreter whatever TF_CPP_MIN_LOG_LEVEL says).
_NATIVE_NOISE = ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",)


@contextlib.contextmanager
def quiet_native_stderr(is_noise=None):
    """Capture what native code writes to fd 2 while loading, and pass on all but the known noise
    (``is_noise(line)``; by default LiteRT's XNNPACK line)."""
    is_noise = is_noise or (lambda line: line in _NATIVE_NOISE)
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


def exit_code(exc: BaseException) -> int:
    for cls, code in ((ModelError, EXIT_MODEL), (InputError, EXIT_INPUT), (NoExecutorError, EXIT_NO_EXECUTOR),
                      (RuntimeNotInstalledError, EXIT_NO_EXECUTOR), (ConfigError, EXIT_CONFIG),
                      (ExecutorError, EXIT_RUNTIME), (EdgeAccelError, EXIT_ERROR)):
        if isinstance(exc, cls):
            return code
    return EXIT_INTERNAL


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edgeaccel", description="Run a model on the best executor this device has.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f".{module_name}", __name__)
        p = sub.add_parser(name, help=module.HELP, description=module.__doc__)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        module.add_arguments(p)
        p.set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = getattr(args, "debug", False)
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.handler(args) or EXIT_OK)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # every error ends as one line and an exit code; --debug shows where
        if debug:
            raise
        if isinstance(exc, EdgeAccelError):
            print(f"error: {exc.message}", file=sys.stderr)
            if exc.hint:
                print(f"hint: {exc.hint}", file=sys.stderr)
        else:
            print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
            print("hint: this is a bug in edgeaccel; run again with --debug and report the traceback", file=sys.stderr)
        return exit_code(exc)


def entry() -> None:
    sys.exit(main())
