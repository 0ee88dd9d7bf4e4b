"""``edgeaccel run MODEL --input VIDEO|/dev/videoN|rtsp://...|FOLDER``: serve live sources through the model
(``model.watch``) with a line per second (frames in, out, dropped, latency p50/p99 split into queue wait and
inference, executor, temperature, and the policy's shedding with --policy), then a summary (``--json``: one document, schema edgeaccel.run.live/1)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

VIDEO_SUFFIXES = {".mp4", ".mkv", ".mov", ".avi", ".webm", ".m4v", ".ts", ".mpg", ".mpeg", ".flv", ".mjpeg",
                  ".mjpg", ".h264", ".h265", ".hevc", ".gif", ".ogv", ".wmv", ".3gp"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("live sources (--input a video, /dev/videoN, rtsp:// or http:// URL, image folder)")
    # --save is vision_view's: an image for one picture, a video .mp4/.mkv/.avi or a folder for a live source
    g.add_argument("--jsonl", metavar="FILE", help="write one JSON line per frame")
    g.add_argument("--drop", choices=("none", "oldest", "latest"),
                   help="what a full queue does: none waits (files; default), oldest/latest drop (live; default "
                        "for cameras and streams: latest)")
    g.add_argument("--max-fps", type=float, help="at most this many frames per second per source")
    g.add_argument("--track", action="store_true",
                   help="track the detections (ids, lost/ended events) per source; needs a detect model")
    g.add_argument("--zones", metavar="YAML", help="lines and zones to count on (implies --track): a YAML file "
                   "of lines:, zones:, anchor: and tracker: options (docs/sources.md, Tracking)")
    g.add_argument("--line", action="append", default=[], metavar="NAME=X1,Y1,X2,Y2",
                   help="a line to count crossings of, in the frame's pixels (repeatable; implies --track)")
    g.add_argument("--zone", action="append", default=[], metavar="NAME=X1,Y1,X2,Y2,X3,Y3,...",
                   help="a polygon to count entries, exits and dwell in (repeatable; implies --track)")
    g.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve the lines' and zones' counts, occupancy and dwell as Prometheus metrics at "
                        "http://HOST:PORT/metrics while the run lasts (needs prometheus-client; 0: any free port)")


def wanted(args: argparse.Namespace) -> bool:
    """Whether an --input is a live source (video, camera, stream, folder, glob) rather than an image or .npy."""
    from ..sources.readers import NETWORK_SCHEMES

    for source in args.input:
        low = source.lower()
        if (low.startswith(NETWORK_SCHEMES) or low.startswith("/dev/video") or Path(source).is_dir()
                or Path(source).suffix.lower() in VIDEO_SUFFIXES or any(c in source for c in "*?[")):
            return True
    return False


def main(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ..errors import EdgeAccelError
    from ..loader import load, schedule
    from ..options import TaskOptions
    from . import quiet_native_stderr
    from .options import runtime_options, selection_options

    from . import vision_view

    options = vision_view.load_kwargs(args) if getattr(args, "task", None) else {}  # "auto" recognizes it
    task_options = options.get("task_options") or TaskOptions(labels=getattr(args, "labels", None))
    # labels: drawn on a --save video even without --task; the image size and fitting of model.pipeline, with
    # or without a task
    fitting = {key: getattr(args, key) for key in ("imgsz", "letterbox") if getattr(args, key, None) is not None}
    task_options = replace(task_options, **fitting)
    common = dict(executor=args.executor, device=args.device, task=options.get("task"),
                  selection=selection_options(args), runtime=runtime_options(args), task_options=task_options)
    with quiet_native_stderr():
        if args.policy:
            model = schedule(args.model, args.policy, power_budget_w=args.power_budget, **common)
        else:
            model = load(args.model, **common)
    out = sys.stderr if args.json else sys.stdout
    error = None
    interrupted = False
    with model:
        sinks = [s for s in (args.save, args.jsonl) if s]
        pipeline = model.watch(list(args.input), drop=args.drop, max_fps=args.max_fps, sinks=sinks,
                               **tracking_kwargs(args))
        metrics = serve_metrics(args, pipeline.sources, pipeline.tracking)
        line = LiveLine(out, model, pipeline)
        start = time.monotonic()
        timer = None
        if args.duration:  # ends the run even when no frame comes (a stream that is down)
            import threading

            timer = threading.Timer(args.duration, pipeline.close)
            timer.daemon = True
            timer.start()
        line.start()
        try:
            for _frame in pipeline:
                if args.duration and time.monotonic() - start >= args.duration:
                    break
        except KeyboardInterrupt:
            interrupted = True
        except EdgeAccelError as exc:  # a source ended with an error: the others were served; say it in the summary
            error = exc
        finally:
            if timer is not None:
                timer.cancel()
            pipeline.close()
            if metrics is not None:
                metrics.shutdown()
        line.end()
        summary = pipeline.summary()
        executor = model.executor
    summary["executor"] = f"{executor.runtime} {executor.version} on {executor.device}"
    summary["error"] = str(error).splitlines()[0] if error else None
    summary["saved"] = sinks
    if args.json:
        json.dump({"schema": "edgeaccel.run.live/1", **summary}, sys.stdout, indent=2, default=str)
        print()
    else:
        _print_summary(summary)
    if interrupted:
        print("interrupted: the summary covers the frames served until Ctrl-C", file=sys.stderr)
        return 130
    return 1 if error else 0


def tracking_kwargs(args: argparse.Namespace) -> dict:
    """watch()'s track= and zones= from --track, --zones, --line and --zone (none of them: {})."""
    from ..tracking import Line, Zones, load_zones, parse_spec

    lines, zones = getattr(args, "line", []) or [], getattr(args, "zone", []) or []
    if not (getattr(args, "track", False) or getattr(args, "zones", None) or lines or zones):
        return {}
    shapes, tracker = load_zones(args.zones) if getattr(args, "zones", None) else (Zones(), None)
    extra = [parse_spec(spec, "line") for spec in lines] + [parse_spec(spec, "zone") for spec in zones]
    if extra:
        shapes = Zones([*shapes.lines, *(x for x in extra if isinstance(x, Line))],
                       [*shapes.zones, *(x for x in extra if not isinstance(x, Line))], shapes.anchor)
    has_shapes = bool(shapes.lines or shapes.zones)
    return {"track": tracker or True, "zones": shapes if has_shapes else None}


def serve_metrics(args: argparse.Namespace, sources: list, tracking: list | None):
    """With --metrics-port: the lines and zones served as Prometheus metrics (a server to ``shutdown()``)."""
    port = getattr(args, "metrics_port", None)
    if port is None:
        return None
    from ..errors import InputError
    from ..tracking.metrics import serve_metrics as serve

    if tracking is None:
        raise InputError("--metrics-port serves the counts of tracked objects: give --track, --zones, --line or --zone",
                         hint="e.g. --line door=0,300,640,300 --metrics-port 9108")
    try:
        import prometheus_client  # noqa: F401
    except ImportError as exc:
        raise InputError("--metrics-port needs prometheus-client", hint="pip install 'edgeaccel[serve]'") from exc
    server, bound = serve(port, lambda: [(s.name, t) for s, t in zip(sources, tracking, strict=True)])
    print(f"metrics   http://0.0.0.0:{bound}/metrics", file=sys.stderr, flush=True)
    return server


class LiveLine:
    """One line per second, from its own thread (so that it goes on while a stream is down): frames in/out,
    dropped, latency, executor, temperature, reconnects, and the policy's shedding."""

    def __init__(self, stream, model, pipeline) -> None:
        import threading

        self.stream, self.model, self.pipeline = stream, model, pipeline
        self.tty = stream.isatty()
        self.shown = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="edgeaccel-live-line", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.show()
            except Exception:  # the model closing under a last tick: the summary follows anyway
                return

    def show(self) -> None:
        s = self.pipeline.summary()
        lat, stages = s["latency_ms"], s["stages_ms"]
        dropped = sum(s["dropped"].values())
        text = (f"{s['elapsed_s']:6.0f}s  in {s['frames_in']}  out {s['frames_out']} ({s['fps']:.1f}/s)  "
                f"dropped {dropped}  latency p50 {_ms(lat['p50'])} p99 {_ms(lat['p99'])} (queue "
                f"{_ms(stages['queue']['p50'])}, inference {_ms(stages['inference']['p50'])} at p50)  "
                f"{self.model.executor.runtime}:{self.model.executor.device}  {_temperature(self.model)}")
        tracked = [src["tracking"] for src in s["sources"] if "tracking" in src]
        if tracked:
            text += f"  tracks {sum(t['tracks'] for t in tracked)}"
        reconnects = sum(src["reconnects"] for src in s["sources"])
        if reconnects:
            text += f"  reconnects {reconnects}"
        shedding = self.pipeline.shedding
        if shedding:
            text += f"  policy sheds at the source ({shedding[:60]})"
        self.stream.write(("\r" + text.ljust(140)) if self.tty else text + "\n")
        self.stream.flush()
        self.shown = True

    def end(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        if self.tty and self.shown:
            self.stream.write("\n")


def _tracking_lines(tracking: dict) -> str:
    def per_class(counts: dict) -> str:
        return ", ".join(f"{label} {n}" for label, n in sorted(counts.items())) or "0"

    rows = [f"          tracks: {tracking['tracks']} ids given"]
    for name, c in tracking.get("lines", {}).items():
        rows.append(f"          line {name}: in {per_class(c['in'])}; out {per_class(c['out'])}")
    for name, c in tracking.get("zones", {}).items():
        dwell = ", ".join(f"{label} {v:.1f} s" for label, v in sorted(c["dwell_s"].items())) or "none"
        rows.append(f"          zone {name}: in {per_class(c['in'])}; out {per_class(c['out'])}; inside now "
                    f"{c['inside']}; dwell {dwell}")
    return "\n".join(rows)


def _temperature(model) -> str:
    telemetry = getattr(model, "telemetry", None)
    if not telemetry:
        return "temp n/a (use --policy to sample it)"
    temps = [f"{name} {sample.temp_c:.1f}C" for name, sample in telemetry.items()
             if getattr(sample, "temp_c", None) is not None]
    return " ".join(temps) or "temp n/a"


def _ms(value) -> str:
    return f"{value:.1f} ms" if value is not None else "n/a"


def _print_summary(s: dict) -> None:
    lat = s["latency_ms"]
    from ..wording import counted

    print(f"summary   {counted(s['frames_out'], 'frame')} out of {s['frames_in']} in {s['elapsed_s']:.1f} s "
          f"({s['fps']} FPS) on {s['executor']}")
    print("          dropped " + ", ".join(f"{k} {v}" for k, v in s["dropped"].items())
          + f"; failed {s['failed']}")
    print(f"latency   p50 {_ms(lat['p50'])}, p99 {_ms(lat['p99'])}: from a frame's arrival to its result")
    parts = ", ".join(f"{stage} {_ms(v['p50'])}" for stage, v in s["stages_ms"].items())
    print(f"          p50 by stage: {parts} (queue: waiting between stages)")
    for src in s["sources"]:
        extra = f", reconnects {src['reconnects']} ({src['outage_s']} s without frames)" if src["reconnects"] else ""
        print(f"source    {src['source']}: in {src['frames_in']}, out {src['frames_out']}{extra}")
        for event in src["events"]:
            print(f"          {event}")
        if src["error"]:
            print(f"          ended: {src['error']}")
        if "tracking" in src:
            print(_tracking_lines(src["tracking"]))
    for path in s["saved"]:
        print(f"saved     {path}")
    if s["error"]:
        print(f"error     {s['error']}")
