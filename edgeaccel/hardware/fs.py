"""Moved to ``edgeaccel.devfs`` (one device-file layer for the probe and telemetry); kept so that imports of
``edgeaccel.probe.fs`` keep working."""

from __future__ import annotations

from ..devfs import READ_LIMIT, Read, Root, Tree, as_tree, natural_key

__all__ = ["READ_LIMIT", "Read", "Root", "Tree", "as_tree", "natural_key"]
