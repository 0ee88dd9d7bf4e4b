"""Device files: reading a device's sysfs/procfs/dev tree below a root, and writing fake ones for tests.

One layer for every reader of device files (the probe's survey, the telemetry sensors, the executors'
diagnoses): paths are looked up below a root (``/`` on this machine, a folder for a fake tree or a mounted
image of another device), never above it (``confine``: one escape rule), and a file that cannot be read is a
reason in one set of words (``words``), never an exception. ``fake.DeviceFiles`` writes such trees, in one
unit convention (the caller's values in SI units and degrees Celsius; the files in the kernel's units).

Only the standard library: every layer above may import this one.
"""

from __future__ import annotations

from .confine import confined, surveyed_root
from .files import children, exists, is_dir, natural_key, read_bytes, under
from .tree import READ_LIMIT, Read, Root, Tree, as_tree

__all__ = ["READ_LIMIT", "Read", "Root", "Tree", "as_tree", "children", "confined", "exists", "is_dir",
           "natural_key", "read_bytes", "surveyed_root", "under"]
