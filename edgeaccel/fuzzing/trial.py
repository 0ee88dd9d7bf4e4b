"""One fuzz trial: ``edgeaccel.load`` + ``run`` on a model file, its outcome as a plain dict.

Run in a child process by the harness (``python -m edgeaccel.fuzzing.child``): whatever the runtimes do to
that process, the harness observes it.
"""

from __future__ import annotations

import random
import time
import traceback

MAX_INPUT_BYTES = 64 << 20  # a mutant that declares a larger input is loaded but not run
DYNAMIC_SIZES = (1, 2, 3, 5, 8, 16, 33)  # small sizes on purpose: the runtime facts' ORT SIGFPE needs H < kernel


def make_inputs(specs, rng: random.Random):
    """Random arrays fitting ``specs`` (dynamic dims get small sizes), or the reason none can be made."""
    import numpy as np

    arrays, total = [], 0
    np_rng = np.random.default_rng(rng.randrange(2**32))
    for spec in specs:
        shape = tuple(d if d is not None else rng.choice(DYNAMIC_SIZES) for d in spec.shape)
        dtype = spec.dtype
        if dtype.kind not in "biuf":
            return f"input {spec.name!r} is {dtype}"
        count = 1
        for d in shape:
            count *= d
        total += count * dtype.itemsize
        if total > MAX_INPUT_BYTES:
            return f"inputs declare {total} bytes"
        if dtype.kind == "f":
            arrays.append(np_rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(np_rng.integers(0, 2, shape).astype(bool))
        else:
            info = np.iinfo(dtype)
            arrays.append(np_rng.integers(max(info.min, -128), min(info.max, 255), shape, endpoint=True).astype(dtype))
    return arrays


def run_trial(path: str, isolate: bool = False, seed: int = 0, limits: dict | None = None) -> dict:
    """Load and run ``path`` the way an application would; classify how it ended."""
    import edgeaccel

    start = time.perf_counter()
    stage = "load"
    result: dict = {"path": path}
    try:
        isolation = (edgeaccel.IsolationLimits(**limits) if limits else True) if isolate else False
        with edgeaccel.load(path, runtime=edgeaccel.RuntimeOptions(isolate=isolation)) as model:
            result["executor"] = model.executor.name
            result["fallbacks"] = len(model.fallbacks)
            stage = "run"
            inputs = make_inputs(model.inputs, random.Random(seed))
            if isinstance(inputs, str):
                result.update(outcome="ok", note=f"loaded; not run: {inputs}")
            else:
                model.run(inputs)
                result.update(outcome="ok")
    except edgeaccel.EdgeAccelError as exc:
        text = str(exc)
        result.update(outcome="error", error=type(exc).__name__, message=text[:400],
                      empty=not (exc.message or "").strip())
    except Exception as exc:  # a foreign exception type is a defect: the campaign reports it
        result.update(outcome="foreign", error=f"{type(exc).__module__}.{type(exc).__name__}",
                      message=str(exc)[:400], traceback=traceback.format_exc()[-1500:])
    result["stage"] = stage
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result


def run_raw_trial(path: str, runtime: str, seed: int = 0) -> dict:
    """The same file through a raw runtime, no edgeaccel in between: what validation saves a caller from.
    LiteRT: Interpreter + allocate_tensors + invoke; ONNX Runtime: InferenceSession (default options) + run."""
    import numpy as np

    start = time.perf_counter()
    result: dict = {"path": path, "raw": runtime}
    try:
        if runtime == "litert":
            from ai_edge_litert.interpreter import Interpreter

            interpreter = Interpreter(model_path=path)
            interpreter.allocate_tensors()
            for d in interpreter.get_input_details():
                interpreter.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
            interpreter.invoke()
        elif runtime == "onnxruntime":
            import onnxruntime as ort

            session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            rng = random.Random(seed)
            feeds = {}
            for i in session.get_inputs():
                shape = [d if isinstance(d, int) and d >= 0 else rng.choice(DYNAMIC_SIZES) for d in i.shape]
                dtype = {"tensor(float)": np.float32, "tensor(uint8)": np.uint8, "tensor(int64)": np.int64,
                         "tensor(int8)": np.int8, "tensor(int32)": np.int32}.get(i.type, np.float32)
                feeds[i.name] = np.ones(shape, dtype)
            session.run(None, feeds)
        else:
            raise ValueError(f"no raw trial for {runtime!r}")
        result["outcome"] = "ok"
    except Exception as exc:
        result.update(outcome="error", error=type(exc).__name__, message=str(exc)[:400])
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result


def run_unchecked_isolated_trial(path: str, seed_model: str, runtime: str, seed: int = 0,
                                 limits: dict | None = None) -> dict:
    """The mutant handed to ``runtime`` in an isolated worker *without* edgeaccel's validation (described as
    its seed model): the mutants that crash the runtime reach it, and the caller must still only see
    edgeaccel errors. Validation cannot be skipped through the public API; this is the fuzzer's way in."""
    import dataclasses

    import edgeaccel
    from edgeaccel import formats
    from edgeaccel.executors.base import ExecutorOptions
    from edgeaccel.isolation import IsolationLimits
    from edgeaccel.isolation.executor import IsolatedExecutor

    start = time.perf_counter()
    stage = "load"
    result: dict = {"path": path, "unchecked": runtime}
    try:
        info = dataclasses.replace(formats.describe(seed_model), path=__import__("pathlib").Path(path))
        executor = IsolatedExecutor(runtime, info, "CPU", ExecutorOptions(), IsolationLimits(**(limits or {})))
        try:
            stage = "run"
            inputs = make_inputs(info.inputs, random.Random(seed))
            if isinstance(inputs, str):
                result.update(outcome="ok", note=f"loaded; not run: {inputs}")
            else:
                executor.run(inputs)
                result.update(outcome="ok")
        finally:
            executor.close()
    except edgeaccel.EdgeAccelError as exc:
        result.update(outcome="error", error=type(exc).__name__, message=str(exc)[:400],
                      empty=not (exc.message or "").strip())
    except Exception as exc:
        result.update(outcome="foreign", error=f"{type(exc).__module__}.{type(exc).__name__}",
                      message=str(exc)[:400], traceback=traceback.format_exc()[-1500:])
    result["stage"] = stage
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result
