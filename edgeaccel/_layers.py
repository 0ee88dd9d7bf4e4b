"""Which part of edgeaccel may import which: the layer table that tests/test_layers.py enforces.

A unit is a subpackage (``probe``, ``executors``, ...) or a top-level module (``loader``, ``model``, ...);
``edgeaccel`` is the package's own ``__init__`` (the public facade). A unit may import units of its own layer
or of a lower one. An import that climbs (module level, inside a function, ``importlib.import_module("...")``
or a ``"package.module:name"`` reference loaded later) must be listed in ``EXCEPTIONS`` with its reason, so
that a new one fails the test instead of slipping in. Nothing at runtime reads this file.
"""

from __future__ import annotations

# Bottom to top. Units of one layer may import each other (the cycles inside a layer are issue work, not
# what this table guards).
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundation", frozenset({
        "errors", "wording", "_version", "_data", "_layers", "digest", "quantiles", "packages", "native_log",
        "runtimeinfo", "schema", "bench", "tracking", "clock",
    })),
    ("model facts", frozenset({"modelinfo", "tensors", "formats"})),
    ("hardware survey", frozenset({"probe", "telemetry"})),
    ("runtimes", frozenset({
        "executors", "profiles", "selector", "cache", "timing", "inventory", "isolation",
    })),
    # Task pre/post-processing sits below Model today: calibration, agreement and the model pipeline use it.
    ("task data", frozenset({"vision", "imageio", "model_pipeline", "agreement", "bundle", "samples"})),
    ("selection", frozenset({"calibration", "guard", "background", "failed_artifacts"})),
    ("model", frozenset({"model"})),
    ("opening and running", frozenset({"loader", "scheduling", "sources"})),
    ("public API and services", frozenset({
        "edgeaccel", "convert", "evaluation", "profiling", "serve", "ray", "sim", "testing", "fuzzing", "cascade",
    })),
    ("command line", frozenset({"cli", "__main__"})),
)

# (importer, imported): why this import climbs. Remove an entry when its import goes.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("probe", "inventory"): "probe() surveys runtimes through inventory, loaded by name so probe/ imports no "
                            "executor; issue 34 defines probe() where it is exported instead",
    ("executors", "profiling"): "an executor class names its profiler as 'module:function', loaded only when "
                                "profiling; the collector belongs to profiling, the choice of it to the class",
    ("model", "sources"): "Model.watch() opens a live source; issue 34 layers sources (and vision) above Model "
                          "through a task wrapper",
}


def layer_of(unit: str) -> int | None:
    """The index of the unit's layer in LAYERS, or None for a unit the table does not know."""
    for index, (_, units) in enumerate(LAYERS):
        if unit in units:
            return index
    return None
