"""--executor on the command line: the names of edgeaccel.executors.names, case-insensitive, with aliases.

An unknown name is a usage error (exit 2) that lists the valid ones, raised while the arguments are parsed.
"""

from __future__ import annotations

import argparse

from ..executors.names import ALIASES, SHOWN_ALIASES, resolve_executor  # noqa: F401 (re-exported)


def executor_arg(text: str) -> str:
    """argparse ``type=`` for --executor: a wrong name becomes argparse's usage error, exit 2."""
    try:
        return resolve_executor(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
