"""Run a model once per --runs on an image, a .npy file or random data; print the executor, the top-k labels
and the latency percentiles (or all of it as JSON with --json)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import duration
from .inputs import add_input_arguments, prepare_inputs

HELP = "run a model on an image, .npy or random input and report the answer and latency"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="model file (.tflite, .onnx, OpenVINO .xml)")
    add_input_arguments(p)
    p.add_argument("--labels", help="text file with one label per line, for the top-k")
    p.add_argument("--top-k", type=int, default=5, help="how many classes to show (default 5)")
    p.add_argument("--runs", type=int, default=10, help="timed runs (default 10)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    p.add_argument("--executor", help="pin the runtime: litert, onnxruntime, openvino")
    p.add_argument("--device", help="pin the device: CPU, GPU, NPU, CUDA, AUTO, ...")
    p.add_argument("--precision", choices=("f32", "bf16", "f16", "int8"), help="opt into reduced precision")
    p.add_argument("--threads", type=int, help="CPU threads (default: usable cores)")
    p.add_argument("--strict", action="store_true", help="fail instead of falling back to another executor")
    p.add_argument("--isolate", action="store_true",
                   help="load and run the model in a worker process: a runtime crash or hang becomes an error")
    p.add_argument("--json", action="store_true", help="print one JSON document (schema edgeaccel.run/1)")
    duration.add_arguments(p)


def main(args: argparse.Namespace) -> int:
    if duration.wanted(args):  # a sustained run under a scheduling policy
        return duration.main(args)
    import numpy as np

    from ..errors import InputError
    from ..loader import load
    from . import quiet_native_stderr

    if args.runs < 1 or args.warmup < 0 or args.top_k < 0:
        raise InputError("--runs must be at least 1, --warmup and --top-k at least 0")
    with quiet_native_stderr():
        model = load(args.model, executor=args.executor, device=args.device, precision=args.precision,
                     threads=args.threads, strict=args.strict, isolate=args.isolate)
    with model:
        arrays, described = prepare_inputs(model, args)
        for _ in range(args.warmup):
            model.run(arrays)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            outputs = model.run(arrays)
            times.append(time.perf_counter() - start)
        report = {
            "schema": "edgeaccel.run/1",
            "model": {"path": str(model.info.path), "format": model.info.format.value},
            "executor": _executor_dict(model.executor),
            "fallbacks": [str(f) for f in model.fallbacks],
            "inputs": [{"name": s.name, "source": d} for s, d in zip(model.inputs, described)],
            "outputs": [{"name": s.name, "dtype": str(a.dtype), "shape": list(a.shape)}
                        for s, a in zip(model.outputs, outputs)],
            "top_k": _top_k(model, outputs, args, np),
            "latency_ms": _latency(times, args, np),
        }
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        _print(report)
    return 0


def _top_k(model, outputs, args, np) -> list[dict]:
    if not args.top_k or not outputs:
        return []
    scores = outputs[0]
    spec = model.outputs[0]
    if scores.ndim not in (1, 2) or (scores.ndim == 2 and scores.shape[0] != 1) or scores.shape[-1] < 2:
        return []
    from ..tensors import dequantize_array

    values = scores.reshape(-1)
    if spec.quantization is not None and values.dtype.kind in "iu":
        values = dequantize_array(values, spec.quantization)
    labels = _labels(args.labels, values.size)
    order = np.argsort(-values.astype(np.float64), kind="stable")[: args.top_k]
    return [{"index": int(i), "label": labels[i] if labels else None, "score": float(values[i])} for i in order]


def _labels(path: str | None, classes: int) -> list[str] | None:
    from ..errors import InputError

    if not path:
        return None
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError as exc:
        raise InputError(f"cannot read labels {path}: {exc.strerror or exc}") from exc
    lines = [line for line in lines if line] if len(lines) > classes else lines
    if len(lines) == classes + 1 and lines[0].lower() in ("background", "???", "__background__"):
        lines = lines[1:]  # a 1001-line file with "background" for a 1000-class model
    if len(lines) < classes:
        lines += [f"class {i}" for i in range(len(lines), classes)]
    return lines


def _latency(times: list[float], args, np) -> dict:
    ms = np.asarray(times) * 1e3
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return {"p50": round(float(p50), 4), "p90": round(float(p90), 4), "p99": round(float(p99), 4),
            "mean": round(float(ms.mean()), 4), "min": round(float(ms.min()), 4), "max": round(float(ms.max()), 4),
            "runs": args.runs, "warmup": args.warmup}


def _executor_dict(info) -> dict:
    return {"runtime": info.runtime, "version": info.version, "device": info.device, "precision": info.precision,
            "threads": info.threads, "reason": info.reason, "artifact": info.artifact,
            "isolated": "isolated" in info.details}


def _print(report: dict) -> None:
    ex = report["executor"]
    print(f"model     {report['model']['path']} ({report['model']['format']})")
    threads = f", {ex['threads']} threads" if ex["threads"] else ""
    isolated = ", in a worker process (--isolate)" if ex["isolated"] else ""
    print(f"executor  {ex['runtime']} {ex['version']} on {ex['device']}, {ex['precision']}{threads}{isolated}")
    print(f"          why: {ex['reason']}")
    for event in report["fallbacks"]:
        print(f"fallback  {event}")
    for item in report["inputs"]:
        print(f"input     {item['name'] or '#0'}: {item['source']}")
    if report["top_k"]:
        print(f"top-{len(report['top_k'])}")
        for entry in report["top_k"]:
            label = entry["label"] if entry["label"] is not None else f"class {entry['index']}"
            print(f"  {entry['score']:8.4f}  {label}  [{entry['index']}]")
    else:
        for out in report["outputs"]:
            print(f"output    {out['name']}: {out['dtype']} {'x'.join(map(str, out['shape']))}")
    lat = report["latency_ms"]
    print(f"latency   p50 {lat['p50']:.3f} ms  p90 {lat['p90']:.3f} ms  p99 {lat['p99']:.3f} ms  "
          f"({lat['runs']} runs after {lat['warmup']} warm-up)")
