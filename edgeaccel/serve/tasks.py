"""Task endpoints: an encoded image in, the model's vision task result out (schema ``edgeaccel.vision/1``,
docs/vision.md): boxes, labels and scores in the original image's pixels, a segmentation mask as PNG or RLE,
keypoints, top-k classes, plus the executor that answered.

The model's ``task`` is the one ``edgeaccel.load`` binds (``--task``/``--labels`` on the command line, the
model's metadata, or recognized from its outputs). A request is admitted to the core's bounded queue before its
image is decoded, so decoding a flood of large photos is refused at ``--max-queue`` like any other request;
decoding, the task's pre- and postprocessing run in a small pool of worker threads (numpy and Pillow release
the GIL), never on the HTTP event loop. The model itself runs through ``ServeCore.infer``: the same scheduler,
device gate, timeouts and metrics as a tensor request."""

from __future__ import annotations

import base64
import concurrent.futures
import io
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..vision.errors import TaskError
from .core import ServeCore
from .errors import ServeError, from_edgeaccel
from .images import decode_image
from .streams import Streams, Ticket
from .task_options import RequestOptions


class TaskService:
    def __init__(self, core: ServeCore, threads: int | None = None) -> None:
        self.core = core
        self._pool: ThreadPoolExecutor | None = None
        self._threads = threads or max(2, min(8, os.cpu_count() or 2))

    @property
    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="edgeaccel-task")
        return self._pool

    @property
    def streams(self) -> Streams:
        """The server's streams (one set for both protocols: a stream's frames may come over either)."""
        return self.core.streams

    def has_task(self, name: str, version: str = "") -> bool:
        """Whether the model answers images (a 404 for a model the server does not hold)."""
        try:
            return self.core.get(name, version).model.task is not None
        except ServeError:
            raise
        except Exception:  # a task that does not fit: task_of says why
            return True

    def task_of(self, name: str, version: str = "") -> Any:
        """The model's vision task; a 400 saying how to give one when it has none."""
        served = self.core.get(name, version)
        try:
            task = served.model.task
        except Exception as exc:  # a task named on the command line that does not fit: said when loaded, too
            raise from_edgeaccel(exc, name) from None
        if task is None:
            raise ServeError(400, f"model '{name}' has no vision task (none was given and none was recognized "
                                  f"from its outputs), so it takes tensors only: POST /v2/models/{name}/infer, or "
                                  f"restart the server with --task {name}=detect (classify, segment, pose) and "
                                  f"--labels {name}=FILE")
        return task

    def prepare(self, task: Any, data: bytes | memoryview, where: str) -> tuple[dict, Any, float]:
        """Decode and preprocess (a worker thread): the model's inputs by name, the Frame, the seconds taken."""
        start = time.perf_counter()
        rgb = decode_image(data, where)
        try:
            arrays, frame = task.preprocess(rgb)
        except Exception as exc:
            raise from_edgeaccel(exc) from None
        names = [t.name for t in task._inputs]
        return dict(zip(names, arrays, strict=True)), frame, time.perf_counter() - start

    def finish(self, task: Any, answer: Any, frame: Any, masks: str, timing: dict) -> dict:
        """The task's result as JSON-ready data (a worker thread)."""
        return self.encode(self.postprocess(task, answer, frame, timing), answer, masks)

    def postprocess(self, task: Any, answer: Any, frame: Any, timing: dict) -> Any:
        """The task's Result of the model's outputs (a worker thread)."""
        start = time.perf_counter()
        try:
            result = task.postprocess([answer[t.name] for t in task._outputs], frame)
        except TaskError as exc:  # the model's outputs, not the request: a 400 would send the client to fix its image
            raise ServeError(409, f"the outputs of model '{task._info.path.name}' for this image do not decode as "
                                  f"its task ({task.name}, {task.kind}): {exc.message}; the request is not at fault: "
                                  "the server's --task for the model, or the model's export, is") from None
        except Exception as exc:
            raise from_edgeaccel(exc) from None
        timing["postprocess"] = (time.perf_counter() - start) * 1e3
        result.timing_ms = timing
        return result

    @staticmethod
    def encode(result: Any, answer: Any, masks: str, stream: dict | None = None) -> dict:
        """A Result as the answer's JSON-ready dict: masks encoded, the executor, the stream's part when tracked."""
        out = result.to_dict()
        mask = getattr(result, "mask", None)
        if mask is not None and masks != "none":
            out["mask"] = encode_mask(mask, masks, getattr(result, "background", 0), out.get("classes", []))
        out["executor"] = getattr(answer, "executor", None)
        if stream is not None:
            out["stream"] = stream
        return out

    def arrive(self, name: str, task: Any, options: RequestOptions) -> Ticket | None:
        """The frame's place in its stream (None for an image of no stream); a 400 for a model that has neither
        boxes to track nor recurrent state to carry, a 501 where SciPy (the tracker's assignment) is missing."""
        if options.stream is None:
            return None
        from ..sources.state import state_pairs

        model = self.core.get(name).model
        state = [(model.outputs[o].name, model.inputs[i].name) for o, i in state_pairs(model, None)]
        tracks = task.name == "detect" or task.kind == "yolo-seg"
        if not tracks and not state:
            raise ServeError(400, f"stream= tracks boxes or carries a model's recurrent state, and model '{name}' "
                                  f"({task.name}, {task.kind}) has neither: send its images without stream=")
        if tracks:
            from ..tracking.assignment import _solver

            try:
                _solver()
            except Exception as exc:
                raise ServeError(501, "stream= needs the server's tracker, which needs SciPy: "
                                      f"{from_edgeaccel(exc).message}") from None
        return self.streams.arrive(name, options.stream, options.timestamp, tracks, state)

    def _admit(self, name: str, task: Any, options: RequestOptions) -> Ticket | None:
        """The request counted in the core's bound, then its frame's place in its stream (a refused request
        makes no stream)."""
        self.core.admit()
        try:
            return self.arrive(name, task, options)
        except BaseException:
            self.core.release()
            raise

    def predict(self, name: str, version: str, data: bytes | memoryview, options: RequestOptions | None = None,
                timeout_s: float | None = None, where: str = "the request's image") -> dict:
        """One image, answered in the calling thread (a gRPC handler thread): the result as a dict."""
        options = options or RequestOptions()
        task = options.task_for(self.task_of(name, version))
        ticket = self._admit(name, task, options)
        try:
            try:
                inputs, frame, took = self.prepare(task, data, where)
                if ticket is not None and ticket.state_in is not None:  # after the stream's previous frame ran
                    try:
                        inputs.update(ticket.state_in.result(self._wait_s(timeout_s)) or {})
                    except (TimeoutError, concurrent.futures.TimeoutError):  # one class from 3.11 on, two before
                        raise _behind(name, options.stream, self._wait_s(timeout_s)) from None
            except BaseException:
                self.core.release()
                raise
            future, ran, wait = self._infer(name, version, inputs, timeout_s)
            try:
                answer = future.result(wait)
            except (TimeoutError, concurrent.futures.TimeoutError):
                raise _late(name, wait) from None
            if ticket is not None:
                ticket.ran(answer)
            timing = {"preprocess": took * 1e3, "inference": (time.perf_counter() - ran) * 1e3}
            if ticket is None:
                return self.finish(task, answer, frame, options.masks, timing)
            result = self.postprocess(task, answer, frame, timing)
            try:
                stream = ticket.complete(result).result(wait)  # after the frames of the stream that came before
            except (TimeoutError, concurrent.futures.TimeoutError):
                raise _behind(name, options.stream, wait) from None
            return self.encode(result, answer, options.masks, stream)
        finally:
            if ticket is not None:
                ticket.abandon()  # a frame that failed: the stream's later frames do not wait for it

    async def predict_async(self, name: str, version: str, data: bytes | memoryview,
                            options: RequestOptions | None = None, timeout_s: float | None = None,
                            where: str = "the request's image") -> dict:
        """One image for the HTTP side: decoding and the task's halves in the pool, the wait on the loop."""
        import asyncio

        options = options or RequestOptions()
        task = options.task_for(self.task_of(name, version))
        loop = asyncio.get_running_loop()
        ticket = self._admit(name, task, options)
        try:
            try:
                inputs, frame, took = await loop.run_in_executor(self.pool, self.prepare, task, data, where)
                if ticket is not None and ticket.state_in is not None:  # after the stream's previous frame ran
                    try:
                        inputs.update(await asyncio.wait_for(asyncio.wrap_future(ticket.state_in),
                                                             self._wait_s(timeout_s)) or {})
                    except asyncio.TimeoutError:
                        raise _behind(name, options.stream, self._wait_s(timeout_s)) from None
            except BaseException:
                self.core.release()
                raise
            future, ran, wait = self._infer(name, version, inputs, timeout_s)
            try:
                answer = await asyncio.wait_for(asyncio.wrap_future(future), wait)
            except asyncio.TimeoutError:
                raise _late(name, wait) from None
            if ticket is not None:
                ticket.ran(answer)
            timing = {"preprocess": took * 1e3, "inference": (time.perf_counter() - ran) * 1e3}
            if ticket is None:
                return await loop.run_in_executor(self.pool, self.finish, task, answer, frame, options.masks, timing)
            result = await loop.run_in_executor(self.pool, self.postprocess, task, answer, frame, timing)
            # tracked in the stream's arrival order: complete() applies this frame and any parked after it (in
            # the pool: not the loop's time) and never waits; this frame's answer may wait, on the loop, for the
            # frames before it
            tracking = await loop.run_in_executor(self.pool, ticket.complete, result)
            try:
                tracked = await asyncio.wait_for(asyncio.wrap_future(tracking), wait)
            except asyncio.TimeoutError:
                raise _behind(name, options.stream, wait) from None
            return await loop.run_in_executor(self.pool, self.encode, result, answer, options.masks, tracked)
        finally:
            if ticket is not None:
                ticket.abandon()

    def _infer(self, name: str, version: str, inputs, timeout_s: float | None):
        """The admitted request sent to the model: (its future, when it was sent, how long to wait for it)."""
        future = self.core.infer(name, inputs, version, timeout_s, admitted=True)
        return future, time.perf_counter(), self._wait_s(timeout_s)

    def _wait_s(self, timeout_s: float | None) -> float:
        """The longest a request waits for its answer (or for its stream's previous frame)."""
        return (timeout_s or self.core.options.timeout_s) + 5.0

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)


def encode_mask(mask: np.ndarray, how: str, background: int, classes: list[dict]) -> dict:
    """A class-id mask (H x W, the original image's size) as a PNG or as COCO run-length encodings.

    png: one grayscale PNG (8-bit, or 16-bit when an id exceeds 255) of the class ids, base64; for instance
    masks (background -1) each pixel holds the class id of the instance on top + 1, 0 where no instance is
    (``offset`` says which: a pixel's class id is its value - offset).
    rle: per class present, COCO's uncompressed RLE: ``counts`` are alternating runs of 0 and 1 in
    column-major order, starting with a run of 0 (pycocotools' ``frPyObjects`` reads it)."""
    height, width = mask.shape[:2]
    if how == "png":
        from PIL import Image

        values = mask.astype(np.int64) - background if background < 0 else mask.astype(np.int64)
        wide = values.max(initial=0) > 255
        image = Image.fromarray(values.astype(np.uint16 if wide else np.uint8))  # "I;16" or "L"
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return {"format": "png", "width": width, "height": height,
                "values": "class id + 1, 0 where no instance" if background < 0 else "class id",
                "offset": -background if background < 0 else 0,  # a pixel's class id is its value - offset
                "data": base64.b64encode(buffer.getvalue()).decode("ascii")}
    ids = [c["class_id"] for c in classes if "class_id" in c] if background >= 0 else \
        sorted(int(v) for v in np.unique(mask) if v != background)
    return {"format": "rle", "width": width, "height": height,
            "values": "class id",
            "rle": [{"id": int(i), "size": [height, width], "counts": counts}
                    for i, counts in zip(ids, rle_by_id(mask, ids), strict=True)]}


def rle_by_id(mask: np.ndarray, ids: list[int]) -> list[list[int]]:
    """COCO's uncompressed RLE counts of ``mask == i`` for each id, from one pass over the mask: the mask's
    column-major runs of one value, grouped by value (a pass over the whole image per id took 0.32 s for the 89
    ids of a 1080p mask painted with 100 rectangles, against 0.012 s this way). An id absent from the mask is one run of 0s."""
    flat = np.asarray(mask).ravel(order="F")
    size = flat.size
    if size == 0:
        return [[] for _ in ids]
    starts = np.concatenate(([0], np.flatnonzero(flat[1:] != flat[:-1]) + 1))
    ends = np.append(starts[1:], size)
    values = flat[starts]
    order = np.argsort(values, kind="stable")  # each value's runs together, in image order
    first = np.searchsorted(values[order], ids, "left")
    last = np.searchsorted(values[order], ids, "right")
    out = []
    for a, b in zip(first.tolist(), last.tolist(), strict=True):
        runs = order[a:b]
        # alternating runs: 0s before the first run of the id, its 1s, the 0s up to the next, ..., the 0s after
        edges = np.column_stack((starts[runs], ends[runs])).ravel()
        counts = np.diff(np.concatenate(([0], edges, [size]))).tolist()
        out.append(counts if counts[-1] else counts[:-1])
    return out


def _behind(name: str, stream: str | None, wait: float) -> ServeError:
    return ServeError(504, f"model '{name}': this frame of stream {stream} waited {wait:g} s for the stream's "
                           "frames sent before it, which did not finish; send a stream's frames in order")


def _late(name: str, wait: float) -> ServeError:
    return ServeError(504, f"model '{name}' did not answer within {wait:g} s")
