"""Options shared by the commands that load a model: where the cache is, and ignoring it."""

from __future__ import annotations

import argparse


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
