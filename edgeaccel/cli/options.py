"""Options shared by the commands that load a model: where the cache is, and ignoring it."""

from __future__ import annotations

import argparse

from ..options import RuntimeOptions, SelectionOptions


def add_cache_arguments(p: argparse.ArgumentParser, measurements: bool = True) -> None:
    p.add_argument("--cache-dir", metavar="DIR",
                   help="edgeaccel's cache folder (default $EDGEACCEL_CACHE_DIR or ~/.cache/edgeaccel; "
                        "`edgeaccel cache info` shows it)")
    what = "compiled models, validation results and `tune` measurements" if measurements else \
        "compiled models and validation results"
    p.add_argument("--no-cache", action="store_true", help=f"neither read nor keep {what}")


def cache_kwargs(args: argparse.Namespace) -> dict:
    """``cache_dir=`` and ``cache=`` for edgeaccel.load / select from --cache-dir and --no-cache."""
    return {"cache_dir": getattr(args, "cache_dir", None), "cache": not getattr(args, "no_cache", False)}


def runtime_options(args: argparse.Namespace, **fields) -> RuntimeOptions:
    """``RuntimeOptions`` from the flags this command has (--threads, --cache-dir, --no-cache, --isolate), with
    ``fields`` over them."""
    given: dict = {"threads": getattr(args, "threads", None), "cache_dir": getattr(args, "cache_dir", None),
                   "cache": not getattr(args, "no_cache", False)}
    if getattr(args, "isolate", False):
        given["isolate"] = True
    return RuntimeOptions(**{**given, **fields})


def selection_options(args: argparse.Namespace, **fields) -> SelectionOptions:
    """``SelectionOptions`` from the flags this command has (--precision, --strict, --goal, --profile), with
    ``fields`` over them."""
    given = {name: getattr(args, name) for name in ("precision", "strict", "goal", "profile")
             if getattr(args, name, None) is not None}
    return SelectionOptions(**{**given, **fields})
