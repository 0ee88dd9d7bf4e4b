"""Fuzz campaigns: seeded mutants of real models, each tried in a child process, every outcome classified.

Outcome classes:
- ``ok``: loaded (and ran, when inputs could be made);
- ``error``: an edgeaccel error with a message (the intended way to fail); ``empty`` marks an empty message;
- ``foreign``: an exception outside edgeaccel's tree escaped (a defect);
- ``died``: the process running ``edgeaccel.load``/``run`` was killed by a signal or exited (a defect: the
  application would be dead); ``reproduced`` says whether a fresh process died on it again;
- ``hang``: no answer within the time limit (a defect).

Mutant ``i`` of a campaign depends on (seed, i) alone, so any one can be rebuilt without the others.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import mutate_bytes, mutate_ir, mutate_onnx, mutate_tflite

DEFECTS = ("foreign", "died", "hang")


@dataclass
class Mutant:
    index: int
    seed_model: str
    strategy: str  # "bytes" or "structure"
    mutations: list[str]
    data: bytes
    suffix: str
    companion: Path | None = None  # a file the mutant needs beside it, unchanged (an IR's .bin)


def corpus(fmt: str, shared_models: Path, zoo_folder: Path | None = None) -> list[Path]:
    """The seed models of a format: the shared models (no Edge TPU bodies: no runtime here reaches past
    their custom op) and, for ONNX, the small models of ``onnx_zoo``."""
    if fmt == "tflite":
        return sorted(p for p in shared_models.glob("*.tflite") if not p.name.endswith("_edgetpu.tflite"))
    if fmt == "onnx":
        from . import onnx_zoo

        found = sorted(shared_models.glob("*.onnx"))
        if zoo_folder is not None:
            found += onnx_zoo.build_all(zoo_folder)
        return found
    if fmt == "ir":  # each .xml with its .bin beside it
        return sorted(shared_models.glob("openvino/*.xml"))
    raise ValueError(f"unknown fuzz format {fmt!r} (tflite, onnx, ir)")


def mutants(fmt: str, seeds: list[Path], seed: int, count: int, start: int = 0) -> Iterator[Mutant]:
    """``count`` mutants; 40% byte-level, 60% structure-aware. Small seed models are drawn more often
    (they load and run in milliseconds, so more mutants per minute reach the runtimes)."""
    blobs = {p: p.read_bytes() for p in seeds}
    weights = [1.0 / max(len(blobs[p]), 20_000) ** 0.5 for p in seeds]
    structural = {"tflite": mutate_tflite.mutate, "onnx": mutate_onnx.mutate, "ir": mutate_ir.mutate}[fmt]
    for i in range(start, start + count):
        rng = random.Random(f"{seed}:{i}")
        path = rng.choices(seeds, weights)[0]
        if rng.random() < 0.4:
            strategy, (data, done) = "bytes", mutate_bytes.mutate(blobs[path], rng)
        else:
            strategy = "structure"
            try:
                data, done = structural(blobs[path], rng)
            except Exception as exc:  # the mutator itself could not re-pack this combination: use bytes
                strategy, (data, done) = "bytes", mutate_bytes.mutate(blobs[path], rng)
                done.insert(0, f"(structure mutation failed to pack: {type(exc).__name__})")
        yield Mutant(i, path.name, strategy, done, data, path.suffix, path.with_suffix(".bin") if fmt == "ir" else None)


class ChildRunner:
    """Keeps one child process that runs trials one after another; replaces it when it dies or hangs."""

    def __init__(self, rlimit_as: int = 0, stderr_path: Path | None = None) -> None:
        self.rlimit_as = rlimit_as
        self.stderr_path = stderr_path
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ, EDGEACCEL_FUZZ_RLIMIT_AS=str(self.rlimit_as), PYTHONUNBUFFERED="1",
                   TF_CPP_MIN_LOG_LEVEL="3")
        stderr = open(self.stderr_path, "ab") if self.stderr_path else subprocess.DEVNULL
        try:
            return subprocess.Popen([sys.executable, "-m", "edgeaccel.fuzzing.child"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=stderr, env=env, start_new_session=True)
        finally:
            if self.stderr_path:
                stderr.close()

    def run(self, request: dict, timeout: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        deadline = time.monotonic() + timeout
        started = False
        for line in _lines(proc, deadline):
            message = json.loads(line)
            if "start" in message:
                started = True
                continue
            return message
        if proc.poll() is None:  # no answer in time: a hang
            _kill(proc)
            self.proc = None
            return {"path": request["path"], "outcome": "hang", "message": f"no answer within {timeout:.0f} s",
                    "started": started}
        self.proc = None
        code = proc.returncode
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        return {"path": request["path"], "outcome": "died", "message": f"the process running the trial {how}",
                "signal": signal.Signals(-code).name if code < 0 else None, "exit_code": code}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                _kill(self.proc)
        self.proc = None


def _lines(proc: subprocess.Popen, deadline: float) -> Iterator[bytes]:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    pending = b""
    fd = proc.stdout.fileno()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                return
            chunk = os.read(fd, 65536)
            if not chunk:
                proc.wait()
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                yield line
    finally:
        sel.close()


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the child's own workers (isolation) go with it
    except ProcessLookupError:
        pass
    proc.wait()


@dataclass
class Summary:
    outcomes: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    defects: list[dict] = field(default_factory=list)
    total: int = 0
    seconds: float = 0.0

    def add(self, result: dict) -> None:
        self.total += 1
        outcome = result["outcome"]
        if outcome == "error" and result.get("empty"):
            outcome = "error-empty-message"
        self.outcomes[outcome] += 1
        if outcome == "error":
            self.errors[f"{result.get('stage')}:{result.get('error')}"] += 1
        if outcome in DEFECTS or outcome == "error-empty-message":
            self.defects.append(result)

    @property
    def clean(self) -> bool:
        return not self.defects

    def as_dict(self) -> dict:
        return {"total": self.total, "seconds": round(self.seconds, 1), "outcomes": dict(self.outcomes),
                "errors": dict(self.errors.most_common()), "defects": self.defects}


def campaign(fmt: str, seeds: list[Path], seed: int, count: int, workdir: Path, *, isolate: bool = False,
             limits: dict | None = None, timeout: float = 60.0, rlimit_as: int = 8 << 30, start: int = 0,
             time_budget: float | None = None, confirm: bool = True, log=None, raw: str | None = None,
             unchecked: str | None = None) -> Summary:
    """Run ``count`` mutants; keep the files of defects in ``workdir/kept`` with a JSON note each.

    raw: instead of edgeaccel, hand each mutant to that runtime directly ("litert", "onnxruntime"): the
    baseline that shows what the validation and isolation are worth on the same mutants.
    unchecked: hand each mutant to that runtime in an isolated worker without validation, so that the
    mutants that crash the runtime do reach it: isolation alone must turn them into edgeaccel errors."""
    paths = {p.name: p for p in seeds}
    workdir.mkdir(parents=True, exist_ok=True)
    kept = workdir / "kept"
    runner = ChildRunner(rlimit_as, workdir / "child-stderr.log")
    summary = Summary()
    began = time.monotonic()
    try:
        for m in mutants(fmt, seeds, seed, count, start):
            if time_budget is not None and time.monotonic() - began > time_budget:
                break
            # A new name per mutant, unlinked after: rewriting one file in place while a runtime still maps the
            # previous mutant from it raises SIGBUS in the child (seen once), which is not the mutant's doing.
            path = workdir / f"mutant-{m.index}{m.suffix}"
            path.write_bytes(m.data)
            if m.companion is not None:
                path.with_suffix(m.companion.suffix).symlink_to(m.companion.resolve())
            request = {"path": str(path), "isolate": isolate, "seed": m.index, "limits": limits, "raw": raw,
                       "unchecked": unchecked, "seed_model": str(paths[m.seed_model])}
            result = runner.run(request, timeout)
            if result["outcome"] == "died" and confirm:
                # heap damage from an earlier mutant could kill the child later: a fresh process tells
                fresh = ChildRunner(rlimit_as, workdir / "child-stderr.log")
                again = fresh.run(request, timeout)
                fresh.close()
                result["reproduced"] = again["outcome"] == "died"
            result.update(index=m.index, seed_model=m.seed_model, strategy=m.strategy, mutations=m.mutations)
            summary.add(result)
            if (result["outcome"] in DEFECTS or result.get("empty")) and not raw:
                kept.mkdir(exist_ok=True)
                name = f"{fmt}-s{seed}-i{m.index}{m.suffix}"
                (kept / name).write_bytes(m.data)
                (kept / f"{name}.json").write_text(json.dumps(result, indent=2))
            if log:
                log(result)
            path.unlink(missing_ok=True)
            if m.companion is not None:
                path.with_suffix(m.companion.suffix).unlink(missing_ok=True)
    finally:
        runner.close()
        summary.seconds = time.monotonic() - began
    return summary
