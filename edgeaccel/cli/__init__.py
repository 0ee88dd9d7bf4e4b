"""The command line: ``edgeaccel probe | run | ...``. The only layer that parses arguments or prints.

Errors become one clear line (and its hint) on stderr and an exit code; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from ..native_log import SHOW_RUNTIME_LOGS, quiet_native_stderr  # noqa: F401 (the commands' import)
from ..errors import (
    ConfigError,
    DeviceUnavailableError,
    EdgeAccelError,
    ExecutorError,
    InputError,
    ModelError,
    NoExecutorError,
    RuntimeNotInstalledError,
    UnsupportedModelError,
)

# Exit codes, documented in the README ("Exit codes"); every command uses these and only these.
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_MODEL, EXIT_INPUT, EXIT_RUNTIME, EXIT_NO_EXECUTOR, EXIT_CONFIG = range(8)
EXIT_MISSING_PACKAGE = 8  # an optional package a command needs (matplotlib, onnx, tensorflow...) is missing
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
    "val": "val_cmd",
    "cache": "cache_cmd",
    "profile": "profile_cmd",
    "serve": "serve_cmd",
}


def exit_code(exc: BaseException) -> int:
    # A valid model nothing here can run (custom op, Edge TPU body, absent device) is "no executor", whichever
    # command found it out: `run` learns it from every candidate failing, `bench` from the one it loads.
    for cls, code in ((UnsupportedModelError, EXIT_NO_EXECUTOR), (ModelError, EXIT_MODEL), (InputError, EXIT_INPUT),
                      (NoExecutorError, EXIT_NO_EXECUTOR), (DeviceUnavailableError, EXIT_NO_EXECUTOR),
                      (RuntimeNotInstalledError, EXIT_MISSING_PACKAGE), (ConfigError, EXIT_CONFIG),
                      (ExecutorError, EXIT_RUNTIME), (EdgeAccelError, EXIT_ERROR)):
        if isinstance(exc, cls):
            return code
    return EXIT_INTERNAL


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, told the terminal's width: by itself it imports shutil to read it (and shutil
    imports bz2 and lzma: 0.7 MB of `edgeaccel run`'s peak memory, on every parser built)."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position, width or _columns() - 2)


def _columns() -> int:
    """The terminal's width the way shutil.get_terminal_size finds it: $COLUMNS, the terminal, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error as two lines (what was wrong, where the options are) and exit 2, instead of
    the whole usage block before the one line that matters."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"error: {message}\nhint: `{self.prog} --help` lists the options\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with ``only``, that one command's (the other modules are not imported)."""
    parser = _Parser(prog="edgeaccel", description="Run a model on the best executor this device has.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    parser.add_argument("--version", action="version", version=f"edgeaccel {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            continue
        module = importlib.import_module(f".{module_name}", __name__)
        p = sub.add_parser(name, help=module.HELP, description=module.__doc__)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        module.add_arguments(p)
        p.set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .inputs import join_negative_values

    argv = join_negative_values(sys.argv[1:] if argv is None else list(argv))
    if _command_in(argv) == "serve":  # a SIGTERM while the parser imports numpy: an exit 0 too, not -15
        from ..serve.early_stop import watch

        watch()
    parser = build_parser(_command_in(argv))
    args = parser.parse_args(argv)
    _FALLBACKS_IN_REPORT[0] = False
    debug = getattr(args, "debug", False)
    SHOW_RUNTIME_LOGS[0] = debug
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not debug:
        for handler in logging.getLogger().handlers:
            handler.addFilter(_one_short_line)
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
            from .error_view import error_lines

            for line in error_lines(exc, args):
                print(line, file=sys.stderr)
        else:
            print(f"internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
            print("hint: this is a bug in edgeaccel; run again with --debug and report the traceback", file=sys.stderr)
        return exit_code(exc)


def _command_in(argv: list[str]) -> str | None:
    """The command the line names, when only --debug comes before it: the parser then imports that command's
    module alone (every command's imports counted in `edgeaccel run`'s peak memory). None: build them all
    (top-level --help lists them, a mistyped command is answered with the choices)."""
    for arg in argv:
        if arg in COMMANDS:
            return arg
        if arg != "--debug":
            return None
    return None


def _version() -> str:
    from .. import __version__

    return __version__


def _one_short_line(record: logging.LogRecord) -> bool:
    """A log record as one line of at most a few hundred characters: a runtime's message can be 17 kB on one
    line (ORT lists every missing input), and a warning is read, not scrolled. --debug keeps them whole.
    Fallback warnings are dropped while the command's own report lists them (they would show twice)."""
    from .error_view import MAX_LINE, short

    message = record.getMessage()
    if "\n" in message or len(message) > MAX_LINE:
        record.msg, record.args = short(message), None
    return not (_FALLBACKS_IN_REPORT[0] and message.startswith("fallback: "))


_FALLBACKS_IN_REPORT = [False]


def fallbacks_in_report() -> None:
    """Called by a command whose output lists model.fallbacks (run)."""
    _FALLBACKS_IN_REPORT[0] = True


def entry() -> None:
    sys.exit(main())
