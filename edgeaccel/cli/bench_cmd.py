"""Benchmark a model: latency (p50/p90/p99 of a synchronous loop, like MLPerf SingleStream) and throughput
(frames per second with requests kept in flight under the throughput hint, like MLPerf Offline), on the
chosen executor or on every candidate side by side (--all)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace

from .inputs import add_input_arguments, prepare_inputs
from .names import executor_arg
from .options import add_cache_arguments, runtime_options, selection_options
from .progress import add_progress_argument

HELP = "measure latency and throughput on one executor or all of them side by side"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="+", help="a model file, several artifacts of one model, a folder or a bundle")
    p.add_argument("--mode", choices=("latency", "throughput", "both"), default="both")
    p.add_argument("--all", action="store_true", help="every candidate executor side by side")
    p.add_argument("--runs", type=int, default=200, help="timed calls per executor in latency mode (default 200)")
    p.add_argument("--requests", type=int, default=500, help="requests per executor in throughput mode (default 500)")
    p.add_argument("--min-seconds", type=float, default=0.0, metavar="S",
                   help="keep measuring each executor for at least S seconds, past --runs/--requests "
                        "(LoadGen's min_duration; use the same S to compare with an MLPerf run)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--executor", type=executor_arg, help="pin the runtime: litert (tflite), onnxruntime (ort), "
                   "openvino (ov), tensorflow")
    p.add_argument("--device")
    p.add_argument("--precision", choices=("f32", "bf16", "f16", "int8", "auto"),
                   help="auto: calibration may admit bf16/f16 where accurate (the default only when no "
                        "--executor/--device is pinned)")
    p.add_argument("--threads", type=int)
    add_input_arguments(p)
    p.add_argument("--json", action="store_true", help="one JSON document (schema edgeaccel.bench/1)")
    p.add_argument("--plot", metavar="FILE.png", help="write the latency distribution per executor")
    add_progress_argument(p)
    p.add_argument("--task", choices=("classify", "detect", "segment", "pose", "auto"),
                   help="also time a vision task's stages on the --input image: pre-processing, inference and "
                        "post-processing (decoding, NMS) separately (in --mode latency or both)")
    p.add_argument("--labels", help="labels for --task (.txt or .pbtxt; default: the model's, see model.pipeline)")
    add_cache_arguments(p, measurements=False)


def main(args: argparse.Namespace) -> int:
    from .. import bench
    from ..errors import InputError
    from ..loader import select
    from ..telemetry.utilization import UtilizationSampler
    from . import quiet_native_stderr
    from .progress import Status, wanted

    if args.runs < 1 or args.requests < 1 or args.warmup < 0 or not 0 <= args.min_seconds < 86400:
        raise InputError("--runs and --requests must be at least 1, --warmup and --min-seconds at least 0")
    if args.plot:
        _plot_possible(args.plot)
    source = args.model[0] if len(args.model) == 1 else args.model
    with Status("bench", wanted(args)) as status:
        status.step("choosing the executors")
        with quiet_native_stderr():
            selection = select(source, executor=args.executor, device=args.device,
                               selection=selection_options(args), runtime=runtime_options(args))
        candidates = selection.ranking.candidates if args.all else selection.ranking.candidates[:1]
        if not candidates:
            from ..opening import nothing_can_run

            raise nothing_can_run(selection.ranking)
        with UtilizationSampler() as sampler:  # from the first load to the last measurement
            results = _measure(candidates, selection, args, bench, status)
    if args.plot:
        bench.plot([r for r in results if isinstance(r, bench.Result)], args.plot)
        print(f"plot: wrote the latency distribution per executor to {os.path.abspath(args.plot)}", file=sys.stderr)
    report = {"schema": "edgeaccel.bench/1", "model": [str(a.path) for a in selection.artifacts.artifacts],
              "how": {"latency": "synchronous model.run loop (one request at a time)",
                      "throughput": "load(performance_hint='throughput') + submit(), 2 x concurrency in flight",
                      "runs": args.runs, "requests": args.requests, "min_seconds": args.min_seconds},
              "results": [r.as_dict() for r in results], "utilization": sampler.summary()}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
        print("\n" + "\n".join(sampler.lines()))
    return 0


def _measure(candidates: list, selection, args, bench, status) -> list:
    """Latency of every candidate (loaded together, measured interleaved), then throughput of each in turn;
    each step named on the ``status`` line."""
    from ..loader import load_candidate
    from . import quiet_native_stderr

    results: list = []
    if args.mode in ("latency", "both"):
        models = []
        try:
            with quiet_native_stderr():
                for i, cand in enumerate(candidates, 1):
                    status.step(f"loading {cand.name} ({i}/{len(candidates)})")
                    models.append((cand.name, load_candidate(cand, selection.options)))
                    models[-1][1]._bundle = selection.artifacts  # the manifest's pipeline
            arrays, _ = prepare_inputs(models[0][1], args)
            status.step(f"latency of {len(models)} executor(s), interleaved")
            results += bench.latency([(n, m, arrays) for n, m in models], args.runs, args.warmup,
                                     progress=status.count, min_seconds=args.min_seconds)
            if args.task:
                status.step("timing the task's stages")
                results += _stages(models, args, bench)
        finally:
            for _, m in models:
                m.close()
    if args.mode in ("throughput", "both"):
        options = replace(selection.options, performance_hint="throughput")
        for i, cand in enumerate(candidates, 1):
            status.step(f"loading {cand.name} for throughput ({i}/{len(candidates)})")
            with quiet_native_stderr():
                model = load_candidate(cand, options)
            model._bundle = selection.artifacts
            with model:
                arrays, _ = prepare_inputs(model, args)
                status.step(f"throughput of {cand.name} ({i}/{len(candidates)})")
                results.append(bench.throughput(cand.name, model, arrays, args.requests, args.warmup, status.count,
                                                args.min_seconds))
    return results


def _stages(models: list, args, bench) -> list:
    """--task: each loaded model's vision stages, timed on the --input image."""
    from ..vision import make_task
    from ..vision.preprocess import as_rgb
    from .vision_view import image_source

    out = []
    for name, model in models:
        given = (("imgsz", args.imgsz), ("letterbox", args.letterbox), ("normalize", args.normalize))
        options = {k: v for k, v in given if v is not None}
        model.task = make_task(model, None if args.task == "auto" else args.task, args.labels, **options)
        image = as_rgb(image_source(model, args))
        out.append(bench.stages(name, model, model.task, image, args.runs, args.warmup))
    return out


def _plot_possible(path: str) -> None:
    """Before minutes of measuring: --plot needs matplotlib and a folder to write in."""
    from ..errors import InputError, RuntimeNotInstalledError

    try:
        import matplotlib  # noqa: F401  (bench.plot imports it again; this one only asks whether it is there)
    except ImportError:
        raise RuntimeNotInstalledError("--plot needs matplotlib, which is not installed",
                                       hint="pip install 'edgeaccel[plot]', or drop --plot") from None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"--plot {path}: the folder {folder} does not exist")


def _print(report: dict) -> None:
    print(f"model  {', '.join(report['model'])}")
    print(f"{'executor':<28} {'mode':<10} {'n':>6} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9} {'FPS':>9} {'in flight':>9}")
    for r in report["results"]:
        if r["mode"] == "stages":
            continue
        lat = r["latency_ms"]
        print(f"{r['name']:<28} {r['mode']:<10} {r['count']:>6} {lat.get('p50', 0):>9.3f} {lat.get('p90', 0):>9.3f} "
              f"{lat.get('p99', 0):>9.3f} {r['fps']:>9.1f} {2 * r['concurrency'] if r['mode'] == 'throughput' else 1:>9}")
    staged = [r for r in report["results"] if r["mode"] == "stages"]
    if staged:
        print(f"\n{'executor':<28} {'task':<9} {'n':>6} {'pre p50':>9} {'infer p50':>10} {'post p50':>9} "
              f"{'post/infer':>10}")
        for r in staged:
            share = r["postprocess_share_of_inference"]
            print(f"{r['name']:<28} {r['task']:<9} {r['count']:>6} {r['preprocess_ms']['p50']:>9.3f} "
                  f"{r['inference_ms']['p50']:>10.3f} {r['postprocess_ms']['p50']:>9.3f} "
                  f"{'-' if share is None else f'{share:.1%}':>10}")
        print("(milliseconds; pre-processing starts from a decoded image; --mode latency for these alone)")
