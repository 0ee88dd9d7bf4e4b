"""Which part of edgeaccel may import which: the layer table that tests/test_layers.py enforces.

A unit is a subpackage (``probe``, ``executors``, ...) or a top-level module (``loader``, ``model``, ...);
``edgeaccel`` is the package's own ``__init__`` (the public facade). A unit may import units of its own layer
or of a lower one. An import that climbs (module level, inside a function, ``importlib.import_module("...")``
or a ``"package.module:name"`` reference loaded later) must be listed in ``EXCEPTIONS`` with its reason, so
that a new one fails the test instead of slipping in. Nothing at runtime reads this file.
"""

from __future__ import annotations

# Bottom to top. Units of one layer may import each other, but never in a cycle (CYCLES_LEFT below).
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundation", frozenset({
        "errors", "wording", "_version", "_data", "_layers", "digest", "quantiles", "packages", "native_log",
        "runtimeinfo", "schema", "bench", "tracking", "cachedir", "upcalls", "clock",
    })),
    # Reading (and faking) a device's files below a root: under everything that surveys hardware.
    ("device files", frozenset({"devfs"})),
    ("model facts", frozenset({"modelinfo", "tensors", "formats", "modelfiles"})),
    ("hardware survey", frozenset({"hardware", "telemetry"})),
    ("runtimes", frozenset({"executors", "profiles", "isolation", "options"})),
    # Images, vision tasks and agreement sit below Model: calibration (selection) judges decoded results.
    ("task data", frozenset({"vision", "imageio", "agreement", "samples"})),
    ("selection", frozenset({"selection", "machine"})),
    ("model", frozenset({"model", "ranked_model"})),
    ("opening and running", frozenset({"loader", "choice", "opening", "load_keywords", "scheduling", "sources"})),
    ("public API and services", frozenset({
        "edgeaccel", "_moved", "convert", "evaluation", "profiling", "serve", "ray", "sim", "testing", "cascade",
        # in a checkout only: the wheel leaves it out (pyproject.toml), tests and tools/ use it
        "fuzzing",
    })),
    ("command line", frozenset({"cli", "__main__"})),
)

# (importer, imported): why this import climbs. Remove an entry when its import goes.
EXCEPTIONS: dict[tuple[str, str], str] = {}  # none left: a call that must go up is handed down (upcalls.py)


# Import cycles still being cut (tests/test_layers.py fails on any other, and on a listed one that is gone):
# the members, modules by their dotted names or units by theirs, and why the cycle is still there.
CYCLES_LEFT: dict[frozenset[str], str] = {}  # none left


def layer_of(unit: str) -> int | None:
    """The index of the unit's layer in LAYERS, or None for a unit the table does not know."""
    for index, (_, units) in enumerate(LAYERS):
        if unit in units:
            return index
    return None
