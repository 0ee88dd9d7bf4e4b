"""``edgeaccel.ray.Pool``: a warm pool of Ray actors that the caller keeps across calls.

    with edgeaccel.ray.Pool("model.tflite", task="classify", actors=2) as pool:   # start-up paid here, once
        results = pool.predict_batch(["a.jpg", "b.png", frame_array])            # Result objects, input order
        for result in pool.map(camera_frames()):                                 # streamed, bounded in flight
            ...

Ray Data builds its operators, read tasks and a fresh actor pool for every dataset, so each call pays seconds
of start-up (2.7-15 s before the first answer, measured on a 2-core machine) and a batch of a few hundred images
is dominated by it.
Here the actors load the model once, when the pool is made, and stay loaded until ``close()``; a call only ships
its inputs (a path is read on the driver and travels as its encoded bytes, so no node needs the file) and gets the
answers back, with at most ``in_flight`` batches queued on each actor, in the order the inputs came.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from ..errors import ConfigError, EdgeAccelError, InputError, ModelClosedError, WorkerCrashedError
from ._import import import_ray
from .resources import actor_request, check_offered
from .shipping import ModelPayload, labels_given, pack

log = logging.getLogger("edgeaccel.ray")


class PoolActor:
    """One warm actor: the model loaded on its node, answering lists of inputs."""

    def __init__(self, payload: ModelPayload, task: str | None, device: str | None, threads: int | None,
                 options: dict) -> None:
        from .node import load_on_node, node_label

        self.node = node_label()
        self.failed: EdgeAccelError | None = None
        try:
            self.model = load_on_node(payload, task=task, device=device, threads=threads, options=options)
        except EdgeAccelError as exc:  # kept for describe(): Ray reports a failed __init__ only as text
            self.failed = exc

    def describe(self) -> dict:
        import ray

        if self.failed is not None:
            raise self.failed
        return {"executor": self.model.executor.name, "node": self.node,
                "node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def predict(self, items: list, first: int) -> list:
        """Task results for encoded images (bytes, decoded here) or RGB arrays; ``first`` numbers the items
        in errors as the caller counted them."""
        from ..imageio import decode_image

        results = []
        for i, item in enumerate(items):
            try:
                image = decode_image(item, f"input {first + i}") if isinstance(item, bytes) else item
                result = self.model.predict(image)
            except EdgeAccelError as exc:
                raise _numbered(exc, first + i) from None
            result.image = None  # not shipped back: the caller has the image (and gets it back for an array)
            results.append(result)
        return results

    def run(self, items: list, first: int) -> list:
        """model.run on each item (what model.run takes: an array, a list in input order, a dict by name)."""
        outputs = []
        for i, item in enumerate(items):
            try:
                outputs.append(self.model.run(item))
            except EdgeAccelError as exc:
                raise _numbered(exc, first + i) from None
        return outputs


def _numbered(exc: EdgeAccelError, index: int) -> EdgeAccelError:
    """The same error, its message saying which input of the call it was about."""
    copy = type(exc).__new__(type(exc))
    copy.__dict__.update(exc.__dict__)
    copy.message = exc.message if f"input {index}" in exc.message else f"input {index}: {exc.message}"
    copy.args = (copy.message if not exc.hint else f"{copy.message}\n  hint: {exc.hint}",)
    return copy


class Pool:
    """``actors`` Ray actors, each with the model loaded (on its own node, executor chosen there), kept warm
    until ``close()`` (or the end of a ``with`` block).

    model, task, threads_per_actor, num_cpus, device, ship, load_options: as in ``map_batches``.
    batch_size: inputs per call to an actor (fewer round trips; more waiting for the last batch).
    in_flight: batches queued on each actor at once (2: the next is there when one finishes).
    spread: place the actors on different nodes where Ray can (its SPREAD strategy).
    start_timeout: seconds to wait for every actor to load before giving up with the reason.
    """

    def __init__(self, model, *, task: str | None = None, actors: int = 2, batch_size: int = 8,
                 in_flight: int = 2, threads_per_actor: int | None = None, num_cpus: float | None = None,
                 device: str | None = None, ship: str = "bytes", spread: bool = False,
                 start_timeout: float = 300.0, **load_options) -> None:
        from .batches import check_options

        ray = import_ray()
        check_options(load_options, num_cpus, actors=actors, batch_size=batch_size, in_flight=in_flight,
                      threads_per_actor=threads_per_actor)
        payload = pack(model, ship, labels_given(load_options), task)
        if not ray.is_initialized():
            ray.init()  # connect to RAY_ADDRESS, or start a local Ray, as Ray Data does
        check_offered(ray, device)
        cpus = num_cpus if num_cpus is not None else (threads_per_actor or 1)
        total = ray.cluster_resources().get("CPU", 0)
        if actors * cpus > total:
            raise ConfigError(f"{actors} actors x {cpus:g} CPUs ask for more than the {total:g} CPUs of the Ray "
                              "cluster: the rest would wait for CPUs forever", key="actors",
                              hint=f"use at most {max(1, int(total // cpus))} actors, or a fraction num_cpus=0.5")
        request = actor_request(device, cpus)
        if spread:
            request["scheduling_strategy"] = "SPREAD"
        options = {k: v for k, v in load_options.items() if not (k == "labels" and payload.labels)}
        self.task, self.batch_size, self.in_flight = task, batch_size, in_flight
        self._ray = ray
        remote = ray.remote(PoolActor).options(**request)
        payload_ref = ray.put(payload)  # once in the object store, fetched once per node
        self._actors = [remote.remote(payload_ref, task, device, threads_per_actor, options) for _ in range(actors)]
        try:
            self.actors = self._get([a.describe.remote() for a in self._actors], timeout=start_timeout)
        except BaseException:
            self.close()
            raise

    # -- calls ----------------------------------------------------------------------------------------------------
    def map(self, items: Iterable) -> Iterator:
        """Each item's answer, in order, as they come: task results (``model.predict``'s) for a pool with a
        task (items: paths, encoded bytes, RGB arrays, PIL images), else ``model.run``'s outputs (items: what
        ``model.run`` takes). Reads ``items`` lazily: at most ``actors x in_flight`` batches are out at once."""
        ray = self._ray
        if not self._actors:
            raise ModelClosedError("this Pool is closed", hint="make a new edgeaccel.ray.Pool")
        method = "predict" if self.task else "run"
        batches = _batches(items, self.batch_size, self.task is not None)
        pending: dict = {}  # ObjectRef -> (batch number, actor, the driver's arrays to give back)
        idle = [a for a in self._actors for _ in range(self.in_flight)]
        done: dict[int, list] = {}
        next_out, exhausted, number = 0, False, 0
        while True:
            while idle and not exhausted:
                batch = next(batches, None)
                if batch is None:
                    exhausted = True
                    break
                actor = idle.pop(0)
                first, shipped, originals = batch
                pending[getattr(actor, method).remote(shipped, first)] = (number, actor, originals)
                number += 1
            if not pending:
                break
            ready, _ = ray.wait(list(pending), num_returns=1)
            index, actor, originals = pending.pop(ready[0])
            answers = self._get(ready[0])
            if originals:
                for answer, image in zip(answers, originals, strict=True):
                    answer.image = image
            done[index] = answers
            idle.append(actor)
            while next_out in done:
                yield from done.pop(next_out)
                next_out += 1

    def predict_batch(self, images: Iterable) -> list:
        """The task's results for every image, in order (see ``map``)."""
        if not self.task:
            raise ConfigError("this Pool has no task, so it runs tensors, not images", key="task",
                              hint="use pool.run_batch(inputs), or make the Pool with task='classify' (or detect, "
                                   "segment, pose)")
        return list(self.map(images))

    def run_batch(self, inputs: Iterable) -> list:
        """``model.run``'s outputs for every input (what model.run takes), in order."""
        if self.task:
            raise ConfigError(f"this Pool has the task {self.task!r}: it takes images", key="task",
                              hint="use pool.predict_batch(images), or make a Pool without task= for tensors")
        return list(self.map(inputs))

    @property
    def executors(self) -> list[str]:
        return [a["executor"] for a in self.actors]

    # -- life -----------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the actors (their CPUs go back to the cluster). Safe to call twice."""
        actors, self._actors = getattr(self, "_actors", []), []
        for actor in actors:
            try:
                self._ray.kill(actor)
            except Exception as exc:  # noqa: BLE001 - the cluster is already gone: nothing left to stop
                log.debug("could not kill a pool actor: %s", exc)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"{len(self._actors)} actors" if self._actors else "closed"
        return f"<edgeaccel.ray.Pool {state}, task={self.task!r}, executors={sorted(set(self.executors))}>"

    def _get(self, refs, timeout: float | None = None):
        """ray.get, with edgeaccel's own error (not Ray's wrapper) when an actor refused an input or failed."""
        ray = self._ray
        try:
            return ray.get(refs, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise ConfigError(f"the pool's actors did not all start within {timeout:g} s", key="actors",
                              hint="the cluster may lack the CPUs or devices they ask for (`ray status`); use "
                                   "fewer actors, or a longer start_timeout") from None
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, EdgeAccelError):
                raise cause from None
            raise
        except ray.exceptions.RayActorError as exc:
            self.close()
            raise WorkerCrashedError(f"an actor of the pool died: {exc}", hint="the pool is closed; make a new "
                                     "edgeaccel.ray.Pool (`ray status` shows whether its node is gone)") from None


def _batches(items: Iterable, size: int, images: bool) -> Iterator[tuple[int, list, list]]:
    """(index of the first item, what the actor gets, the driver's arrays to attach to the results)."""
    shipped: list = []
    originals: list = []
    first = 0
    for i, item in enumerate(items):
        if images:
            item, original = _image_item(item, i)
            originals.append(original)
        shipped.append(item)
        if len(shipped) == size:
            yield first, shipped, (originals if any(o is not None for o in originals) else [])
            shipped, originals, first = [], [], i + 1
    if shipped:
        yield first, shipped, (originals if any(o is not None for o in originals) else [])


def _image_item(item, index: int):
    """(what travels, the caller's array or None): a path becomes its bytes, read here on the driver."""
    if isinstance(item, (str, os.PathLike)):
        try:
            return Path(item).read_bytes(), None
        except OSError as exc:
            raise InputError(f"input {index}: cannot read {item}: {exc.strerror or exc}",
                             hint="pass image paths that exist on this machine, encoded bytes or RGB arrays") from None
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item), None
    if isinstance(item, np.ndarray):
        return item, item
    if hasattr(item, "convert") and hasattr(item, "size"):  # a PIL image
        array = np.asarray(item.convert("RGB"))
        return array, array
    raise InputError(f"input {index} is a {type(item).__name__}, not an image",
                     hint="pass image paths, encoded bytes (PNG, JPEG) or H x W x 3 uint8 RGB arrays")
