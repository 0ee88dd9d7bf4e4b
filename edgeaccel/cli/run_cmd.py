"""Run a model once per --runs on an image, a .npy file or random data; print the executor, what the outputs
are (class scores with the top-k labels, or the values of other outputs) and the latency percentiles (or all of
it as JSON with --json; --save-outputs keeps every output array)."""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import duration, live, vision_view
from .inputs import add_input_arguments, prepare_inputs
from .names import executor_arg
from .options import add_cache_arguments, runtime_options, selection_options

HELP = "run a model on an image, .npy or random input and report the answer and latency"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="*",
                   help="model file (.tflite, .onnx, OpenVINO .xml), or several artifacts of one model, a folder "
                        "or a bundle")
    p.add_argument("--cascade", metavar="PIPELINE.yaml",
                   help="run a cascade of models instead of MODEL: a detector, then models on its crops, each on "
                        "its own executor (docs/cascade.md)")
    add_input_arguments(p)
    p.add_argument("--quantize", action="store_true",
                   help="quantize float .npy input for a quantized model with the model's own scale")
    p.add_argument("--labels", help="text file with one label per line, or a .pbtxt label map (default: the model's: "
                   "its metadata, its bundle, a label file beside it; see docs/pipeline.md)")
    p.add_argument("--top-k", type=int, default=5, help="how many classes to show (default 5)")
    p.add_argument("--save-outputs", metavar="FILE.npz", help="write every output array (by output name)")
    p.add_argument("--runs", type=int, default=10, help="timed runs (default 10)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    p.add_argument("--executor", type=executor_arg,
                   help="pin the runtime: litert (tflite), onnxruntime (ort), openvino (ov), tensorflow")
    p.add_argument("--device", help="pin the device: CPU, GPU, NPU, CUDA, AUTO, ...")
    p.add_argument("--precision", choices=("f32", "bf16", "f16", "int8", "auto"),
                   help="opt into reduced precision; auto: calibration may admit bf16/f16 where accurate (the "
                        "default only when no --executor/--device is pinned)")
    p.add_argument("--threads", type=int, help="CPU threads (default: usable cores)")
    p.add_argument("--strict", action="store_true", help="fail instead of falling back to another executor")
    p.add_argument("--isolate", action="store_true",
                   help="load and run the model in a worker process: a runtime crash or hang becomes an error")
    add_cache_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document (schema edgeaccel.run/1)")
    vision_view.add_arguments(p)
    duration.add_arguments(p)
    live.add_arguments(p)


def main(args: argparse.Namespace) -> int:
    if getattr(args, "cascade", None):
        from .cascade_run import main as cascade_main

        return cascade_main(args)
    if not args.model:
        from ..errors import InputError

        raise InputError("run needs a MODEL (or --cascade PIPELINE.yaml)", hint="edgeaccel run model.tflite -i image.png")
    args.model = args.model[0] if len(args.model) == 1 else args.model
    if live.wanted(args):  # video files, cameras, streams, image folders: the live pipeline
        return live.main(args)
    if any(getattr(args, key, None) for key in ("track", "zones", "line", "zone")):
        from ..errors import InputError

        raise InputError("--track, --zones, --line and --zone follow objects over frames: they need a live "
                         "--input", hint="give a video, /dev/videoN, a stream URL or a folder of frames")
    if duration.wanted(args):  # a sustained run under a scheduling policy
        return duration.main(args)
    import numpy as np

    from ..errors import InputError
    from ..loader import load
    from . import fallbacks_in_report, quiet_native_stderr
    from .output_view import describe, print_outputs, read_labels

    if args.runs < 1 or args.warmup < 0 or args.top_k < 0:
        raise InputError("--runs must be at least 1, --warmup and --top-k at least 0")
    labels = None if vision_view.wanted(args) else read_labels(args.labels)
    load_options = vision_view.load_kwargs(args)  # without a task, prepare_inputs lays --imgsz over model.pipeline
    fallbacks_in_report()
    with quiet_native_stderr():
        # a one-shot run ends before background calibration would have measured anything: `edgeaccel tune`
        # measures; long runs (--duration, live sources) keep load()'s default
        model = load(args.model, executor=args.executor, device=args.device,
                     selection=selection_options(args, calibrate=False), runtime=runtime_options(args),
                     **load_options)
    with model:
        if vision_view.wanted(args):
            return _run_vision(model, args, np)
        arrays, described = prepare_inputs(model, args)
        if labels is None:  # a bundle's, the model's metadata, a sidecar's or a label file beside the model
            labels = model.pipeline.label_list()
        for _ in range(args.warmup):
            model.run(arrays, quantize=args.quantize)
        times = []
        answered: dict[str, int] = {}  # which executor produced each timed run's outputs
        for _ in range(args.runs):
            start = time.perf_counter()
            outputs = model.run(arrays, quantize=args.quantize)
            times.append(time.perf_counter() - start)
            answered[outputs.executor] = answered.get(outputs.executor, 0) + 1
        shown = describe(model, list(outputs), labels, args.top_k)
        if args.save_outputs:
            _save(args.save_outputs, model, outputs, np)
        report = {
            "schema": "edgeaccel.run/1",
            "model": {"path": str(model.info.path), "format": model.info.format.value},
            "executor": _executor_dict(model.executor),
            "fallbacks": [str(f) for f in model.fallbacks],
            "inputs": [{"name": s.name, "source": d} for s, d in zip(model.inputs, described, strict=True)],
            "kind": shown["kind"],
            "outputs": shown["outputs"],
            "output_executor": outputs.executor,
            "answered_by": answered,
            "top_k": shown["top_k"],
            "top_k_of": shown["top_k_of"],
            "saved_outputs": args.save_outputs,
            "latency_ms": _latency(times, args),
        }
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        _print(report, print_outputs)
    return 0


def _run_vision(model, args, np) -> int:
    times: list[float] = []
    vision = vision_view.run(model, args, times)
    report = {"schema": "edgeaccel.run/1", "model": {"path": str(model.info.path), "format": model.info.format.value},
              "executor": _executor_dict(model.executor), "fallbacks": [str(f) for f in model.fallbacks],
              "kind": f"vision {vision['task']}", "vision": vision, "latency_ms": _latency(times, args)}
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    ex = report["executor"]
    print(f"model     {report['model']['path']} ({report['model']['format']})")
    print(f"executor  {ex['runtime']} {ex['version']} on {ex['device']}, {ex['precision']}")
    print(f"          why: {ex['reason']}")
    for event in report["fallbacks"]:
        print(f"fallback  {event}")
    vision_view.print_result(vision)
    lat = report["latency_ms"]
    print(f"latency   p50 {lat['p50']:.3f} ms  p90 {lat['p90']:.3f} ms  p99 {lat['p99']:.3f} ms  "
          f"({lat['runs']} runs after {lat['warmup']} warm-up, pre- and post-processing included)")
    return 0


def _save(path: str, model, outputs, np) -> None:
    from ..errors import InputError

    arrays = {(spec.name or f"output_{i}"): np.asarray(a)
              for i, (spec, a) in enumerate(zip(model.outputs, outputs, strict=True))}
    try:
        np.savez(path, **arrays)
    except OSError as exc:
        raise InputError(f"cannot write --save-outputs {path}: {exc.strerror or exc}") from exc


def _latency(times: list[float], args) -> dict:
    from ..quantiles import percentiles  # not numpy's: its first call imports 2 MB of numpy.ma and more

    ms = [t * 1e3 for t in times]
    shown = {k: round(v, 4) for k, v in percentiles(ms).items()}
    return {**shown, "mean": round(sum(ms) / len(ms), 4), "min": round(min(ms), 4), "max": round(max(ms), 4),
            "runs": args.runs, "warmup": args.warmup}


def _executor_dict(info) -> dict:
    return {"runtime": info.runtime, "version": info.version, "device": info.device, "precision": info.precision,
            "threads": info.threads, "reason": info.reason, "artifact": info.artifact,
            "isolated": "isolated" in info.details, "measured": (info.reason or "").startswith("measured")}


def _print(report: dict, print_outputs) -> None:
    ex = report["executor"]
    print(f"model     {report['model']['path']} ({report['model']['format']})")
    threads = f", {ex['threads']} threads" if ex["threads"] else ""
    isolated = ", in a worker process (--isolate)" if ex["isolated"] else ""
    print(f"executor  {ex['runtime']} {ex['version']} on {ex['device']}, {ex['precision']}{threads}{isolated}")
    print(f"          why: {ex['reason']}")
    if ex["measured"]:
        print("          this choice comes from measurements kept by `edgeaccel tune` (see `edgeaccel cache info`); "
              "--no-cache ignores them, --executor/--device/--precision pin a choice")
    for event in report["fallbacks"]:
        print(f"fallback  {event}")
    for item in report["inputs"]:
        print(f"input     {item['name'] or '#0'}: {item['source']}")
    if len(report["answered_by"]) > 1:
        print("answered  " + ", ".join(f"{n} runs by {name}" for name, n in report["answered_by"].items()))
    print(f"kind      {report['kind']}")
    print_outputs(report)
    if report["saved_outputs"]:
        print(f"saved     every output to {report['saved_outputs']}")
    lat = report["latency_ms"]
    print(f"latency   p50 {lat['p50']:.3f} ms  p90 {lat['p90']:.3f} ms  p99 {lat['p99']:.3f} ms  "
          f"({lat['runs']} runs after {lat['warmup']} warm-up)")
