"""edgeaccel on Ray (the ``ray`` extra): scale one model out over a cluster.

    import ray, edgeaccel.ray
    ds = ray.data.read_images("frames/", mode="RGB")
    ds = edgeaccel.ray.map_batches(ds, "model.tflite", task="classify", actors=4)   # Ray Data, an actor pool
    pool = edgeaccel.ray.Pool("model.tflite", task="classify", actors=2)              # warm actors, kept
    results = pool.predict_batch(paths)                                             # no start-up per call
    app = edgeaccel.ray.deployment("model.tflite", task="classify")                  # Ray Serve
    edgeaccel.ray.node_resources()       # {"EdgeTPU": 1}: what `ray start --resources` should declare here

Importing this package does not import Ray; each function does, and says how to install it when it is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

_LAZY = {
    "map_batches": ("batches", "map_batches"),
    "EdgeAccelPredictor": ("batches", "EdgeAccelPredictor"),
    "deployment": ("serving", "deployment"),
    "Pool": ("pool", "Pool"),
    "node_resources": ("resources", "node_resources"),
    "ray_start_args": ("resources", "ray_start_args"),
    "survey_cluster": ("cluster", "survey_cluster"),
}

__all__ = list(_LAZY)

if TYPE_CHECKING:
    from .batches import EdgeAccelPredictor, map_batches
    from .cluster import survey_cluster
    from .pool import Pool
    from .resources import node_resources, ray_start_args
    from .serving import deployment


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'edgeaccel.ray' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(f".{module}", __name__), attr)
    globals()[name] = value
    return value
