"""The pipeline: read -> prepare -> infer -> finish -> sink, each stage in its own thread, joined by bounded
queues, so that decoding, pre- and post-processing overlap inference instead of adding to it.

    read (one thread per source)   decode frames; the source queue's drop policy applies here, and only here
    prepare                        take the sources' frames in turn (fair), pre-process (task layer, or resize)
    infer                          ``model.submit`` with the source's carried state; keeps requests in flight
    finish                         wait for each result in order, post-process (task layer), measure latency
    sink                           write the sinks, hand the frame to the caller

Every queue is bounded. Only the source queues drop frames (under ``oldest``/``latest``); with ``none`` a full
queue holds the decoder back, so a file loses no frame. ``close()`` stops every thread from any state.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import EdgeAccelError, InputError, ModelClosedError
from .errors import SourceError
from .frame import STAGES, Frame
from .queues import DROP_POLICIES, Closed, DropQueue
from .readers import RawFrame, Source, open_source
from .stats import PipelineStats, PolicyWatch
from .state import StateCarry, state_pairs, with_state

log = logging.getLogger("edgeaccel")

_END = object()  # the end of every source, through the stages


@dataclass
class _End:
    source: int  # this source has no more frames


@dataclass
class _Job:
    frame: Frame
    source: int
    segment: int
    inputs: Any = None
    meta: Any = None
    submitted: float = 0.0  # monotonic: into the model
    done: float = 0.0  # monotonic: its outputs ready (the future's callback)


class Pipeline:
    """Frames from one or more sources through one model. Iterate it for Frames (in order per source), or call
    ``run()`` to serve until the sources end (sinks only). Use as a context manager, or ``close()``.

    Build it with ``model.watch(...)``; see ``edgeaccel.sources.watch`` for the options."""

    def __init__(self, model, sources: list, *, drop: str | None = None, max_fps: float | None = None,
                 state: dict[str, str] | bool | None = None, sinks=(), queue_size: int = 4,
                 max_in_flight: int | None = None, preprocess=None, keep_images: bool | None = None,
                 names: list[str] | None = None, track=None, zones=None, **source_options) -> None:
        if drop is not None and drop not in DROP_POLICIES:
            raise InputError(f"drop={drop!r} is not a drop policy", hint="drop='none' (files: every frame), "
                             "'oldest' or 'latest' (live: never fall behind)")
        if max_fps is not None and max_fps <= 0:
            raise InputError(f"max_fps must be positive, not {max_fps}")
        if not sources:
            raise InputError("watch() needs at least one source")
        from .sinks import as_sinks

        if names is not None and len(names) != len(sources):
            raise InputError(f"names= gives {len(names)} names for {len(sources)} sources")
        self.model = model
        self.task = getattr(model, "task", None)
        self.max_fps = max_fps
        # what the model needs is checked before any source or sink is opened
        # state=False: the state inputs are still fed, with zeros on every frame (nothing is carried)
        self._pairs = state_pairs(model, None if state is False else state)
        self._carries_state = state is not False
        state_inputs = {i for _, i in self._pairs}
        self._image_inputs = [i for i in range(len(model.inputs)) if i not in state_inputs]
        self._preprocess = preprocess
        if self.task is None and preprocess is None and len(self._image_inputs) != 1:
            names_ = [model.inputs[i].name for i in self._image_inputs]
            raise InputError(f"the model takes {len(self._image_inputs)} inputs besides its state ({names_}); a "
                             "frame can feed one", hint="pass preprocess=lambda image: [...] giving every input")
        if self.task is None and preprocess is None:
            from ..imageio import layout_of

            # a dynamic-size input without a declared size would fail every frame: say it once, now
            layout_of(model.inputs[self._image_inputs[0]], getattr(getattr(model, "pipeline", None), "imgsz", None))
        tracking = _tracking_options(self.task, track, zones)  # checked before anything is opened
        self.sources: list[Source] = []
        self.sinks = as_sinks(sinks, len(sources))
        try:
            for n, spec in enumerate(sources):
                source = open_source(spec, name=names[n] if names else None, **source_options)
                self.sources.append(source)
                source.open()  # a missing file, a non-video, a missing or busy camera fail here, at once
        except BaseException:
            self._close_sources()
            self._close_sinks()
            raise
        for sink in self.sinks:
            attach = getattr(sink, "attach", None)  # a Sink-like object without it gets no timing
            if attach is not None:
                attach(self.sources)
        self.drops = [drop or ("latest" if s.live else "none") for s in self.sources]
        self._carry = [StateCarry(model, self._pairs) if self._pairs else None for _ in self.sources]
        if tracking is not None:
            from ..tracking.live import SourceTracking

            self._tracking = [SourceTracking(*tracking) for _ in self.sources]  # one tracker per source
        else:
            self._tracking = None
        self.keep_images = keep_images if keep_images is not None else True
        concurrency = max(1, getattr(model, "concurrency", 1))
        live = any(d != "none" for d in self.drops)
        # Live: as few frames past the source queue as keep the executor busy, so that a frame is fresh when
        # inference starts (latency stays near one inference); files: a little more, for throughput.
        self.max_in_flight = max_in_flight or (concurrency if live else 2 * concurrency)
        self.stats = PipelineStats([s.name for s in self.sources])
        self._policy = PolicyWatch(model)
        self._raw = [DropQueue(queue_size, d) for d in self.drops]
        self._prepared = DropQueue(1 if live else 2, "none")
        # Just in time (live, one request at a time): a frame is taken from its source queue when the request
        # in flight is expected to end as its pre-processing does, from moving averages of both; it then
        # waits for neither, so latency stays near pre-processing + one inference.
        self._just_in_time = live and self.max_in_flight == 1
        # A model that runs one request at a time (LiteRT, the CPU) is run by the infer stage itself: a request
        # submitted ahead would only wait in the executor, and handing each one to the executor's thread and its
        # result back costs two thread wake-ups per frame (0.7 ms a frame, more on a loaded CPU). A scheduled
        # model (policy=) is always submitted: a stop must not wait for a request its scheduler holds.
        self._inline = concurrency == 1 and not hasattr(model, "policy")
        self._prepare_s = 0.0
        self._infer_s = 0.0
        self._busy_until = 0.0  # monotonic time the request in flight is expected to end
        # The bound on requests in the model: taken before a job is submitted, given back when its result is
        # ready (not when the finish stage gets to it), so that no request waits inside the executor behind
        # another one: a frame's latency is its own inference, not the ones queued ahead of it.
        self._slots = threading.Semaphore(self.max_in_flight)
        self._inflight = DropQueue(self.max_in_flight + 1, "none")
        self._finished = DropQueue(queue_size, "none")
        self._out = DropQueue(queue_size, "none")
        self._arrival = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._consumer = False
        self._closed = False
        self.errors: dict[str, EdgeAccelError] = {}  # source name -> why it ended early
        self.error: BaseException | None = None  # what stopped the whole pipeline (the model closed, a sink failed)

    # -- what the caller sees ---------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    @property
    def shedding(self) -> str | None:
        """Why the scheduling policy limits serving now (frames the sources lose meanwhile count as shed), or None."""
        return self._policy.now()

    def summary(self) -> dict:
        """Frames in/out, dropped by stage, failed, latency p50/p99, reconnects and events, per source and in all;
        with tracking, each source's "tracking": ids given out, line and zone counts."""
        out = self.stats.as_dict(self.sources)
        # strict=False: without tracking there is nothing to pair, and every source keeps its stats
        for source, tracking in zip(out["sources"], self._tracking or (), strict=False):
            source["tracking"] = tracking.summary()
        return out

    def start(self) -> Pipeline:
        if self._threads or self._closed:
            return self
        for i, source in enumerate(self.sources):
            self._spawn(f"read:{source.name}", self._read, i)
        self._spawn("prepare", self._prepare_loop)
        self._spawn("infer", self._infer_loop)
        self._spawn("finish", self._finish_loop)
        self._spawn("sink", self._sink_loop)
        return self

    def __iter__(self) -> Iterator[Frame]:
        self._consumer = True
        self.start()
        try:
            while True:
                try:
                    item = self._out.get(timeout=0.2)
                except TimeoutError:
                    if not self.running:
                        break
                    continue
                except Closed:
                    break
                if item is _END:
                    break
                yield item
        finally:
            self.close()
        self._raise_errors()

    def run(self, timeout: float | None = None) -> dict:
        """Serve until every source ends (or ``timeout`` seconds), writing the sinks; the summary."""
        self.start()
        end = None if timeout is None else time.monotonic() + timeout
        try:
            for t in list(self._threads):
                t.join(None if end is None else max(0.0, end - time.monotonic()))
        finally:
            self.close()
        self._raise_errors()
        return self.summary()

    def close(self) -> None:
        """Stop every stage, close the sources and sinks. Idempotent; safe from any state and any thread."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for q in (*self._raw, self._prepared, self._inflight, self._finished, self._out):
            q.close()
        with self._arrival:
            self._arrival.notify_all()
        me = threading.current_thread()
        for t in self._threads:
            if t is not me:
                t.join(timeout=15.0)  # a stalled network read ends within its read_timeout
        still = [t.name for t in self._threads if t.is_alive()]
        if still:
            log.warning("pipeline threads still running after close: %s", still)
        self._close_sources(alive={t.name for t in self._threads if t.is_alive()})
        self._close_sinks()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- stages ----------------------------------------------------------------------------------------------------
    def _spawn(self, name: str, target, *args) -> None:
        thread = threading.Thread(target=self._guard, args=(target, *args), name=f"edgeaccel-pipeline-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _guard(self, target, *args) -> None:
        try:
            target(*args)
        except Closed:
            pass
        except BaseException as exc:  # a stage failed: stop everything, say why (the iterator raises it)
            if not self._stop.is_set():
                log.error("pipeline stage %s failed: %s", threading.current_thread().name, exc)
                self.error = exc
                self._stop.set()
                for q in (*self._raw, self._prepared, self._inflight, self._finished, self._out):
                    q.close()

    def _read(self, i: int) -> None:
        source, queue, stats = self.sources[i], self._raw[i], self.stats.sources[i]
        interval = 1.0 / self.max_fps if self.max_fps else 0.0
        next_due = 0.0
        index = -1
        size = None
        try:
            asked = time.monotonic()
            for raw in source.frames(self._stop):
                # decoding is the source's own time for this frame: from its packet's arrival, or from when the
                # reader asked for it if the packet came earlier (it then waited in the decoder while the
                # reader was held back by a full queue or max_fps: that wait is counted as queue)
                now = time.monotonic()
                raw.decode_s = max(0.0, now - max(raw.captured, asked))
                index += 1
                shape = raw.image.shape[:2]
                if size is not None and shape != size:  # reported; the frame is still fitted to the model
                    source.event(f"frame size changed from {size[1]}x{size[0]} to {shape[1]}x{shape[0]} at frame "
                                 f"{index}")
                size = shape
                with self.stats.lock:
                    stats.frames_in += 1
                if interval:
                    now = time.monotonic()
                    if now < next_due:
                        if source.live:  # a live source is not slowed down: the frame is skipped
                            with self.stats.lock:
                                stats.dropped["max_fps"] += 1
                            asked = time.monotonic()
                            continue
                        self._stop.wait(next_due - now)  # a file is paced
                    next_due = max(next_due + interval, time.monotonic() - interval)
                dropped = queue.put((index, raw))
                if dropped is not None:
                    with self.stats.lock:
                        stats.dropped["policy" if self._policy.now() else "source"] += 1
                with self._arrival:
                    self._arrival.notify()
                if self._stop.is_set():
                    return
                asked = time.monotonic()
        except Closed:
            return
        except EdgeAccelError as exc:
            self._source_failed(i, exc)
        except Exception as exc:
            self._source_failed(i, SourceError(f"{source.name} failed: {exc}"))
        finally:
            queue.put_end(_End(i))
            with self._arrival:
                self._arrival.notify()

    def _source_failed(self, i: int, exc: EdgeAccelError) -> None:
        self.errors[self.sources[i].name] = exc
        with self.stats.lock:
            self.stats.sources[i].error = exc.message if hasattr(exc, "message") else str(exc)
        log.warning("source %s ended: %s", self.sources[i].name, exc)

    def _prepare_loop(self) -> None:
        active = list(range(len(self.sources)))
        turn = 0
        while active:
            item = None
            # a frame is taken from its source queue only when the next stage has room: until then it waits
            # where the drop policy replaces it with a newer one, never in a queue that would make it stale
            while not self._prepared.wait_space(0.1):
                pass
            if self._just_in_time:
                early = self._busy_until - self._prepare_s - time.monotonic()
                if early > 0:
                    self._stop.wait(min(early, 0.5))
            with self._arrival:
                for k in range(len(active)):  # round robin: each source in turn, so that none starves another
                    i = active[(turn + k) % len(active)]
                    try:
                        item = self._raw[i].get_nowait()
                    except IndexError:
                        continue
                    turn = (turn + k + 1) % max(1, len(active))
                    break
                if item is None:
                    if self._stop.is_set():
                        return
                    self._arrival.wait(0.05)
                    continue
            if isinstance(item, _End):
                active.remove(item.source)
                continue
            self._prepared.put(self._prepare(i, *item))
        self._prepared.put_end(_END)

    def _prepare(self, i: int, index: int, raw: RawFrame) -> _Job:
        began = time.monotonic()
        job = self._prepare_job(i, index, raw)
        ended = time.monotonic()
        self._prepare_s = _average(self._prepare_s, ended - began)
        job.frame.timing_ms["decode"] = raw.decode_s * 1e3
        job.frame.timing_ms["preprocess"] = (ended - began) * 1e3
        return job

    def _prepare_job(self, i: int, index: int, raw: RawFrame) -> _Job:
        frame = Frame(self.sources[i].name, index, raw.timestamp, raw.captured, raw.image)
        job = _Job(frame, i, raw.segment)
        try:
            if self._preprocess is not None:
                job.inputs = list(self._preprocess(raw.image))
            elif self.task is not None:
                job.inputs, job.meta = self.task.preprocess(raw.image)
                job.inputs = list(job.inputs)
            else:
                from ..imageio import image_to_input

                spec = self.model.inputs[self._image_inputs[0]]
                # the model's declared size, letterbox and normalization (a dynamic-size model has no other)
                job.inputs = [image_to_input(raw.image, spec, None, getattr(self.model, "pipeline", None))[0]]
        except Exception as exc:
            frame.error = exc
        return job

    def _infer_loop(self) -> None:
        segments = [0] * len(self.sources)
        pending: list[Any] = [None] * len(self.sources)  # the source's last request: its outputs are the state
        while True:
            self._take_slot()
            # the next request starts as soon as its job is ready: the prepare stage times the next frame by
            # this (set before the job leaves the prepared queue, which is what wakes that stage)
            self._busy_until = time.monotonic() + self._infer_s
            job = self._prepared.get()
            if job is _END:
                self._slots.release()
                self._inflight.put_end(_END)
                return
            future = None
            if job.frame.error is None:
                carry = self._carry[job.source]
                if carry is not None:
                    carry_in = self._state_for(job, carry, pending, segments)
                    inputs = with_state(job.inputs, carry_in, len(self.model.inputs))
                else:
                    inputs = job.inputs
                try:
                    submitted = job.submitted = time.monotonic()
                    self._busy_until = submitted + self._infer_s
                    future = self._run_inline(inputs) if self._inline else self.model.submit(inputs)
                    future.add_done_callback(lambda _, t=submitted, j=job: self._served(t, j))
                except ModelClosedError:
                    self._slots.release()
                    raise
                except EdgeAccelError as exc:
                    job.frame.error = exc
                if carry is not None:
                    pending[job.source] = future
            if future is None:  # nothing went into the model
                self._slots.release()
            self._inflight.put((job, future))

    def _run_inline(self, inputs) -> Any:
        """``model.run`` in this thread, as a finished Future (the finish stage takes both kinds alike)."""
        from concurrent.futures import Future

        future: Future = Future()
        try:
            future.set_result(self.model.run(inputs))
        except ModelClosedError:
            raise
        except Exception as exc:  # what submit's future would hold: the frame fails, the pipeline goes on
            future.set_exception(exc)
        return future

    def _take_slot(self) -> None:
        """Wait until fewer than ``max_in_flight`` requests are in the model; raises Closed on a stop."""
        while not self._slots.acquire(timeout=0.1):
            if self._stop.is_set():
                raise Closed

    def _state_for(self, job: _Job, carry: StateCarry, pending: list, segments: list) -> dict:
        previous = pending[job.source]
        if previous is not None and self._carries_state:
            pending[job.source] = None
            try:
                carry.update(self._wait(previous))
            except Closed:
                raise
            except Exception:
                carry.reset()  # a failed frame: start again from zeros rather than from a stale state
        if job.segment != segments[job.source]:  # the stream was cut and came back: a new scene
            segments[job.source] = job.segment
            carry.reset()
        return carry.values

    def _finish_loop(self) -> None:
        while True:
            item = self._inflight.get()
            if item is _END:
                self._finished.put_end(_END)
                return
            job, future = item
            frame = job.frame
            if future is not None:
                try:
                    frame.outputs = self._wait(future)
                    # the callback stamps `done`; it may run just after the result is handed out
                    frame.timing_ms["inference"] = ((job.done or time.monotonic()) - job.submitted) * 1e3
                    if self.task is not None:
                        began = time.monotonic()
                        frame.result = self.task.postprocess(frame.outputs, job.meta)
                        if self._tracking is not None:  # in frame order per source: this stage is one thread
                            self._tracking[job.source].apply(frame)
                        frame.timing_ms["postprocess"] = (time.monotonic() - began) * 1e3
                except (ModelClosedError, Closed):
                    raise
                except Exception as exc:
                    frame.error = exc
            frame.latency_ms = (time.monotonic() - frame.captured) * 1e3
            _split(frame)
            if frame.result is not None and getattr(frame.result, "timing_ms", None) == {}:
                # the task result's own stages, as model.predict() gives them
                frame.result.timing_ms = {k: frame.timing_ms[k] for k in ("preprocess", "inference", "postprocess")}
            stats = self.stats.sources[job.source]
            with self.stats.lock:
                if frame.error is None:
                    stats.frames_out += 1
                    stats.add(frame.latency_ms, frame.timing_ms)
                else:
                    stats.failed += 1
            if frame.error is not None:
                log.warning("frame %d of %s failed: %s", frame.index, frame.source, frame.error)
            self._finished.put((job.source, frame))

    def _sink_loop(self) -> None:
        while True:
            item = self._finished.get()
            if item is _END:
                self._out.put_end(_END)
                return
            source, frame = item
            for sink in self.sinks:
                sink.write(frame, source)
            if self._consumer:
                if not self.keep_images:
                    frame.image = None
                self._out.put(frame)

    def _served(self, submitted: float, job: _Job) -> None:
        job.done = time.monotonic()
        self._infer_s = _average(self._infer_s, job.done - submitted)
        self._slots.release()

    def _wait(self, future):
        """The future's result; raises Closed when the pipeline stops meanwhile (a scheduler may hold a request
        for up to its max_wait_s: a stop does not wait for it)."""
        from concurrent.futures import TimeoutError as FutureTimeout

        while True:
            try:
                return future.result(timeout=0.2)
            except FutureTimeout:
                if self._stop.is_set():
                    raise Closed from None

    # -- helpers ------------------------------------------------------------------------------------------------
    def _raise_errors(self) -> None:
        if self.error is not None:
            raise self.error
        if self.errors:
            if len(self.errors) == 1:
                raise next(iter(self.errors.values()))
            raise SourceError(f"{len(self.errors)} sources ended with errors: "
                              + "; ".join(f"{e.message}" for e in self.errors.values()))

    def _close_sinks(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:
                log.warning("closing sink %s failed: %s", sink, exc)

    def _close_sources(self, alive: set[str] = frozenset()) -> None:
        for source in self.sources:
            if f"edgeaccel-read:{source.name}" in alive:
                continue  # its reader is still in a read: closing the container under it could crash FFmpeg
            try:
                source.close()
            except Exception as exc:
                log.warning("closing source %s failed: %s", source.name, exc)


def _tracking_options(task, track, zones):
    """(TrackerOptions, Zones or None) for ``track=`` and ``zones=`` (zones track too), or None."""
    if not track and zones is None:
        return None
    from ..tracking import TrackerOptions, as_zones
    from ..tracking.assignment import _solver
    from ..tracking.live import tracks_boxes

    if not tracks_boxes(task):
        what = f"a {task.name} model" if task is not None else "a model without a task"
        raise InputError(f"tracking needs boxes, and {what} gives none",
                         hint="track a detect (or instance segmentation) model: load it with task='detect'")
    _solver()  # SciPy missing is said now, not on the first frame
    from_file = None
    if isinstance(zones, (str, os.PathLike)):  # a zones file may hold tracker options too
        from ..tracking import load_zones

        zones, from_file = load_zones(zones)
    if track in (None, False, True) and from_file:
        track = from_file  # track=TrackerOptions(...) or a dict given in Python wins over the file's
    options = TrackerOptions.from_value(True if track in (None, False) else track)
    return options, as_zones(zones) if zones is not None else None


def _split(frame: Frame) -> None:
    """Every stage in ``frame.timing_ms``, in STAGES order, with "queue" the rest of the latency: the waits."""
    timing = frame.timing_ms
    worked = sum(timing.get(s, 0.0) for s in STAGES if s != "queue")
    frame.timing_ms = {s: timing.get(s, 0.0) for s in STAGES}
    frame.timing_ms["queue"] = max(0.0, frame.latency_ms - worked)


def _average(previous: float, sample: float, weight: float = 0.2) -> float:
    """Exponential moving average; the first sample sets it."""
    return sample if previous == 0.0 else previous + weight * (sample - previous)
