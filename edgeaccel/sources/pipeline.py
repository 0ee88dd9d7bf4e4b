"""The pipeline: read -> prepare -> infer -> finish -> sink, each stage in its own thread, joined by bounded
queues, so that decoding, pre- and post-processing overlap inference instead of adding to it.

    read (one thread per source)   decode frames; the source queue's drop policy applies here, and only here
    prepare                        take the sources' frames in turn (fair), pre-process (task layer, or resize)
    infer                          ``model.submit`` with the source's carried state; keeps requests in flight
    finish                         wait for each result in order, post-process (task layer), measure latency
    sink                           write the sinks, hand the frame to the caller

The readers and the sources' turns are ``intake.py`` (shared with live cascades); the infer stage is
``infer.py``. Every queue is bounded. Only the source queues drop frames (under ``oldest``/``latest``); with
``none`` a full queue holds the decoder back, so a file loses no frame. ``close()`` stops every thread from any state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

from ..errors import EdgeAccelError, InputError, ModelClosedError
from ..tracking.live import tracking_options
from .errors import SourceError
from .frame import STAGES, Frame
from .queues import DROP_POLICIES, Closed, DropQueue
from .infer import END as _END
from .infer import InferStage, Job, average
from .intake import End, Intake
from .readers import RawFrame, Source, open_source
from .stats import PipelineStats, PolicyWatch
from .state import StateCarry, state_pairs

log = logging.getLogger("edgeaccel")



class Pipeline(InferStage):
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
        tracking = tracking_options(self.task, track, zones)  # checked before anything is opened
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

            self.tracking = [SourceTracking(*tracking) for _ in self.sources]  # one tracker per source
        else:
            self.tracking = None
        self.keep_images = keep_images if keep_images is not None else True
        concurrency = max(1, getattr(model, "concurrency", 1))
        live = any(d != "none" for d in self.drops)
        # Live: as few frames past the source queue as keep the executor busy, so that a frame is fresh when
        # inference starts (latency stays near one inference); files: a little more, for throughput.
        self.max_in_flight = max_in_flight or (concurrency if live else 2 * concurrency)
        self.stats = PipelineStats([s.name for s in self.sources])
        self._policy = PolicyWatch(model)
        self._stop = threading.Event()
        self._intake = Intake(self.sources, self.drops, queue_size, self._stop, make=self._made,
                              on_drop=self._dropped, on_error=self._source_failed, max_fps=max_fps)
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
        for source, tracking in zip(out["sources"], self.tracking or (), strict=False):
            source["tracking"] = tracking.summary()
        return out

    def start(self) -> Pipeline:
        if self._threads or self._closed:
            return self
        for i, source in enumerate(self.sources):
            self._spawn(f"read:{source.name}", self._intake.read, i)
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
        self._intake.close()
        for q in (self._prepared, self._inflight, self._finished, self._out):
            q.close()
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
                self._intake.close()
                for q in (self._prepared, self._inflight, self._finished, self._out):
                    q.close()

    def _made(self, i: int, index: int, raw: RawFrame) -> tuple:
        with self.stats.lock:
            self.stats.sources[i].frames_in += 1
        return (i, index, raw)

    def _dropped(self, i: int, why: str) -> None:
        with self.stats.lock:
            self.stats.sources[i].dropped["max_fps" if why == "max_fps" else
                                          "policy" if self._policy.now() else "source"] += 1

    def _source_failed(self, i: int, exc: EdgeAccelError) -> None:
        self.errors[self.sources[i].name] = exc
        with self.stats.lock:
            self.stats.sources[i].error = exc.message if hasattr(exc, "message") else str(exc)
        log.warning("source %s ended: %s", self.sources[i].name, exc)

    def _prepare_loop(self) -> None:
        active = list(range(len(self.sources)))
        while active:
            # a frame is taken from its source queue only when the next stage has room: until then it waits
            # where the drop policy replaces it with a newer one, never in a queue that would make it stale
            while not self._prepared.wait_space(0.1):
                pass
            if self._just_in_time:
                early = self._busy_until - self._prepare_s - time.monotonic()
                if early > 0:
                    self._stop.wait(min(early, 0.5))
            item = self._intake.take()  # the sources in turn, so that none starves another
            if item is None:
                continue
            if isinstance(item, End):
                active.remove(item.source)
                continue
            self._prepared.put(self._prepare(*item))
        self._prepared.put_end(_END)

    def _prepare(self, i: int, index: int, raw: RawFrame) -> Job:
        began = time.monotonic()
        job = self._prepare_job(i, index, raw)
        ended = time.monotonic()
        self._prepare_s = average(self._prepare_s, ended - began)
        job.frame.timing_ms["decode"] = raw.decode_s * 1e3
        job.frame.timing_ms["preprocess"] = (ended - began) * 1e3
        return job

    def _prepare_job(self, i: int, index: int, raw: RawFrame) -> Job:
        frame = Frame(self.sources[i].name, index, raw.timestamp, raw.captured, raw.image)
        job = Job(frame, i, raw.segment)
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
                        if self.tracking is not None:  # in frame order per source: this stage is one thread
                            self.tracking[job.source].apply(frame)
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


def _split(frame: Frame) -> None:
    """Every stage in ``frame.timing_ms``, in STAGES order, with "queue" the rest of the latency: the waits."""
    timing = frame.timing_ms
    worked = sum(timing.get(s, 0.0) for s in STAGES if s != "queue")
    frame.timing_ms = {s: timing.get(s, 0.0) for s in STAGES}
    frame.timing_ms["queue"] = max(0.0, frame.latency_ms - worked)
