"""``edgeaccel.ray.map_batches``: a model over a Ray Dataset, on a fixed pool of actors.

Each actor loads the model once (shipped to its node, see shipping.py), lets edgeaccel choose the executor
from that node's hardware, and gives the runtime as many threads as Ray gave the actor CPUs. ``device=`` asks
Ray for that device's resource (resources.py), so the actors land on the nodes that declared it."""

from __future__ import annotations

import inspect

from ..errors import ConfigError
from ._import import import_ray, import_ray_part
from .resources import actor_request, check_offered
from .shipping import ModelPayload, labels_given, pack

RESERVED = {"threads": "threads_per_actor", "model": "model", "task": "task", "device": "device"}


class EdgeAccelPredictor:
    """The callable class Ray Data runs in each actor: loads in ``__init__``, maps batches in ``__call__``."""

    def __init__(self, payload, task: str | None, device: str | None, threads: int | None,
                 column: str, options: dict) -> None:
        from .node import load_on_node

        if not isinstance(payload, ModelPayload):  # the object-store reference: Ray Data does not resolve it
            import ray

            payload = ray.get(payload)
        self.column = column
        self.model = load_on_node(payload, task=task, device=device, threads=threads, options=options)
        self.images = task is not None

    def __call__(self, batch: dict) -> dict:
        from .columns import predict_columns, run_columns

        if self.images:
            return predict_columns(self.model, batch, self.column)
        return run_columns(self.model, batch)


def map_batches(ds, model, *, task: str | None = None, actors: int = 2, batch_size: int = 16,
                threads_per_actor: int | None = None, num_cpus: float | None = None, device: str | None = None,
                ship: str = "bytes", column: str = "image", **load_options):
    """``ds`` (a ray.data.Dataset) with the model's answers added, on ``actors`` actors (a fixed pool).

    model: what ``edgeaccel.load`` takes (a file, a folder of artifacts, a bundle manifest, a list of files).
    task: "classify" / "detect" / ... reads images from ``column`` ("image": ``ray.data.read_images``) and adds
        the results as plain columns; None feeds raw tensors from columns named after the inputs (columns.py).
    threads_per_actor: threads the runtime uses in each actor (default: the CPUs Ray gave it, at least 1).
    num_cpus: CPUs Ray reserves for each actor (default threads_per_actor, or 1). The pool may not reserve
        every CPU of the cluster while the dataset still has reading to do: Ray's read tasks need CPUs too and
        would wait forever (ConfigError); a fraction (0.5) lets actors and reads share the cores.
    device: an edgeaccel device name ("EdgeTPU", "NPU", "CUDA"): each actor asks Ray for one unit of that
        resource (declared by ``ray start $(edgeaccel probe --ray-resources)``) and loads the model on it.
    ship: "bytes" (the model files travel through Ray's object store) or "path" (every node mounts them).
    load_options: anything else ``edgeaccel.load`` takes (labels, executor, selection, runtime, task_options, ...).
    """
    ray = import_ray()
    import_ray_part("data")
    if not hasattr(ds, "map_batches"):
        from ..errors import InputError

        raise InputError(f"ds is a {type(ds).__name__}, not a Ray Dataset",
                         hint="pass a ray.data.Dataset, e.g. ray.data.read_images(folder, mode='RGB')")
    check_options(load_options, num_cpus, actors=actors, batch_size=batch_size, threads_per_actor=threads_per_actor)
    payload = pack(model, ship, labels_given(load_options), task)
    if not ray.is_initialized():
        ray.init()  # what Ray Data itself does on first use: connect to RAY_ADDRESS, or start a local Ray
    check_offered(ray, device)
    cpus = num_cpus if num_cpus is not None else (threads_per_actor or 1)
    _check_cpus_left(ray, ds, actors, cpus)
    from ray.data import ActorPoolStrategy

    options = actor_request(device, cpus)
    payload_ref = ray.put(payload)  # once in the object store, fetched once per node however many actors
    return ds.map_batches(EdgeAccelPredictor, batch_size=batch_size, batch_format="numpy",
                          compute=ActorPoolStrategy(size=actors),
                          fn_constructor_args=(payload_ref, task, device, threads_per_actor, column,
                                               _without(load_options, "labels") if payload.labels else load_options),
                          **options)


def check_options(load_options: dict, num_cpus, **counts) -> None:
    """Mistakes said on the driver, before any actor starts: a load option that is no option of edgeaccel.load
    (or one this call sets itself), a count (actors, batch_size, ...) that is not a whole number >= 1."""
    for key, instead in RESERVED.items():
        if key in load_options:
            raise ConfigError(f"{key}= is not a load option of map_batches", key=key,
                              hint=f"use {instead}= (a parameter of map_batches itself)")
    from ..load_keywords import MOVED
    from ..loader import load

    # load's own keywords, and the older ones it still takes (with a DeprecationWarning naming the new spelling)
    known = {name for name, p in inspect.signature(load).parameters.items() if p.kind is not p.VAR_KEYWORD}
    known |= {name for name, (where, _) in MOVED.items() if where != "schedule"}
    unknown = sorted(set(load_options) - known)
    if unknown:
        raise ConfigError(f"edgeaccel.load takes no option {', '.join(unknown)}", key=unknown[0],
                          hint=f"load options are {', '.join(sorted(known - set(RESERVED)))}")
    for name, value in counts.items():
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(f"{name}={value!r} must be a whole number >= 1", key=name)
    if num_cpus is not None and (not isinstance(num_cpus, (int, float)) or isinstance(num_cpus, bool) or num_cpus <= 0):
        raise ConfigError(f"num_cpus={num_cpus!r} must be a number > 0 (a fraction shares a core)", key="num_cpus")


def _check_cpus_left(ray, ds, actors: int, cpus: float) -> None:
    """A pool holding every CPU starves the read tasks upstream of it: Ray Data then waits forever."""
    from ray.data.dataset import MaterializedDataset

    total = ray.cluster_resources().get("CPU", 0)
    if isinstance(ds, MaterializedDataset) or actors * cpus < total:
        return
    raise ConfigError(f"{actors} actors x {cpus:g} CPUs would hold all {total:g} CPUs of the Ray cluster, and the "
                      "dataset's read tasks need CPUs too: Ray Data would wait forever", key="actors",
                      hint=f"use fewer actors (at most {max(1, int((total - 1) // cpus))}), or num_cpus=0.5 to let "
                           "the actors share cores with the readers, or materialize() the dataset first")


def _without(options: dict, key: str) -> dict:
    return {k: v for k, v in options.items() if k != key}
