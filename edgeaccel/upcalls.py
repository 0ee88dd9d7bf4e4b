"""Calls that go up the layers, handed down: a module calls what a layer above it registered here at import.

``Model.watch`` opens a live source, and the live sources (``edgeaccel.sources``) sit above ``Model``: they run
one. So ``model.py`` imports no source; the public facade (``edgeaccel/__init__.py``, run before any of
edgeaccel's modules) registers the function that does, and ``Model.watch`` calls it through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_watch: Callable[..., Any] | None = None


def provide_watch(function: Callable[..., Any]) -> None:
    """Register ``function(model, source, *more, **options)``: what ``Model.watch`` calls."""
    global _watch
    _watch = function


def watch(model, source, *more, **options):
    if _watch is None:  # only when edgeaccel/__init__.py did not run, which importing any edgeaccel module does
        raise RuntimeError("Model.watch needs edgeaccel.sources, which the edgeaccel package registers on import")
    return _watch(model, source, *more, **options)
