"""Profile a model per operator: where the time goes, on which device, how much memory, on the executor
`edgeaccel load` would choose, a pinned one (--executor) or every candidate side by side (--all). Per-op times
come from each runtime's own profiler (ONNX Runtime's session profiler, OpenVINO's performance counters); a
runtime that gives none (LiteRT's Python API, TensorFlow) shows its whole-model time and says so."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .inputs import add_input_arguments, prepare_inputs
from .names import executor_arg
from .options import add_cache_arguments, cache_kwargs

HELP = "per-operator time, device and memory on one executor or all of them side by side"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="+", help="a model file, several artifacts of one model, a folder or a bundle")
    p.add_argument("--executor", type=executor_arg, help="pin the runtime: litert (tflite), onnxruntime (ort), "
                   "openvino (ov), tensorflow")
    p.add_argument("--device")
    p.add_argument("--precision", choices=("f32", "bf16", "f16", "int8"))
    p.add_argument("--threads", type=int)
    p.add_argument("--all", action="store_true", help="every candidate executor in turn, operators matched by name")
    p.add_argument("--runs", type=int, default=20, help="timed runs per executor, after the warm-up (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    p.add_argument("--top", type=int, default=15, help="operators shown per executor (default 15)")
    p.add_argument("--json", action="store_true", help="one JSON document (schema edgeaccel.profile/1)")
    p.add_argument("--trace", metavar="FILE.json", help="write a Chrome trace (open in Perfetto or chrome://tracing)")
    p.add_argument("--plot", metavar="FILE.png", help="write the time per layer (needs matplotlib)")
    p.add_argument("--compare", metavar="FLOAT_MODEL", nargs="?", const="",
                   help="also the error each layer adds against the float model it was quantized from; "
                        "on a bundle made by `edgeaccel convert`, without a value: its own float reference")
    add_input_arguments(p)
    add_cache_arguments(p, measurements=False)


def main(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..profiling.profile import profile_model
    from . import quiet_native_stderr
    from .profile_view import profile_lines

    if args.runs < 1 or args.warmup < 0 or args.top < 1:
        raise InputError("--runs and --top must be at least 1, --warmup at least 0")
    for option, path in (("--trace", args.trace), ("--plot", args.plot)):
        if path:
            _writable(option, path)
    if args.plot:
        from ..profiling.plot import pyplot

        pyplot()  # before the measuring: a missing matplotlib is said now, not after minutes
    source = args.model[0] if len(args.model) == 1 else args.model
    with quiet_native_stderr():
        profile = profile_model(source, executor=args.executor, device=args.device, every=args.all,
                                runs=args.runs, warmup=args.warmup, inputs=lambda info: prepare_inputs(info, args)[0],
                                threads=args.threads, precision=args.precision, seed=args.seed,
                                sampler=_utilization_sampler, **cache_kwargs(args))
    comparison = None
    if args.compare is not None:
        from ..profiling.compare import compare_layers

        with quiet_native_stderr():
            comparison = compare_layers(source, args.compare or None, args.input or None, executor=args.executor)
        profile.compare = comparison.to_dict()
    if args.trace:
        from ..profiling.trace import write_trace

        write_trace(profile.executors, args.trace)
        print(f"trace: wrote {os.path.abspath(args.trace)} (open it in https://ui.perfetto.dev)", file=sys.stderr)
    if args.plot:
        from ..profiling.plot import plot_layers

        plot_layers(profile.executors, args.plot, comparison)
        print(f"plot: wrote the time per layer to {os.path.abspath(args.plot)}", file=sys.stderr)
    if args.json:
        print(json.dumps(profile.to_dict(), indent=2))
        return 0
    for line in profile_lines(profile, args.top):
        print(line)
    if comparison is not None:
        print()
        for line in comparison.table_lines(args.top):
            print(line)
    return 0


def _utilization_sampler():
    from ..telemetry.utilization import UtilizationSampler

    return UtilizationSampler(interval_s=0.2)


def _writable(option: str, path: str) -> None:
    from ..errors import InputError

    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"{option} {path}: the folder {folder} does not exist", hint="create it or pick another path")
