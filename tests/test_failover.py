"""Run-time failover on an accelerator that is unplugged mid-run: an executor that answers N calls and then
raises DeviceUnavailableError (what an executor says for a device that is gone). The accelerator wraps the
real LiteRT CPU executor, so its answers are the CPU's; after it goes, every request, from 16 threads at once,
is answered by the next candidate with the same inputs: no wrong answer, no error reaching a caller (unless
strict=True), the switch visible in ``model.fallbacks``. The device is offered again only when the caller asks
(``model.reselect()``).
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import edgeaccel
from edgeaccel.errors import DeviceUnavailableError
from edgeaccel.executors.base import Availability, Executor, ExecutorInfo
from edgeaccel.executors.facts import DeviceSpec
from edgeaccel.loader import open_candidate, select
from edgeaccel.ranked_model import RankedModel
from edgeaccel.modelinfo import Format
from edgeaccel.selection.selector import Ranking

from conftest import SAMPLES

MODEL = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"
THREADS, CALLS = 16, 50


class Unplugged(Executor):
    """An accelerator that answers ``after`` calls, then is gone (a hot-unplug); ``plugged`` is the device's
    presence, shared by every handle to it, as a real device's is."""

    runtime = "unplugged"
    formats = frozenset(Format)
    devices = ("FakeNPU",)
    device_specs = (DeviceSpec("FakeNPU", "npu"),)
    plugged = True

    def __init__(self, inner: Executor, after: int) -> None:
        super().__init__(inner.model, "FakeNPU", inner.options)
        self.inner = inner
        self.left = after
        self.calls = 0
        self._lock = threading.Lock()

    @classmethod
    def availability(cls, device=None) -> Availability:
        return Availability(cls.plugged, "FakeNPU present" if cls.plugged else "FakeNPU unplugged")

    @property
    def info(self) -> ExecutorInfo:
        return ExecutorInfo("unplugged", "test", "FakeNPU", self.inner.info.precision, self.inner.info.threads)

    def run(self, inputs):
        with self._lock:
            if self.left <= 0:
                type(self).plugged = False
            if not type(self).plugged:
                raise DeviceUnavailableError("FakeNPU was unplugged", hint="plug it back in")
            self.left -= 1
            self.calls += 1
        return self.inner.run(inputs)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def accelerated():
    """A Model whose best candidate is the FakeNPU (answering 40 calls), then the real CPU candidates."""
    Unplugged.plugged = True
    selection = select(MODEL)
    cpu = selection.ranking.candidates
    accel = dataclasses.replace(cpu[0], runtime="unplugged", device="FakeNPU", kind="npu",
                                reason="an accelerator that will be unplugged")
    opened = []

    def open_next(candidate):
        if candidate is accel:
            if not Unplugged.plugged:
                raise DeviceUnavailableError("FakeNPU: not present", hint="plug it back in")
            executor = Unplugged(open_candidate(cpu[0], selection.options), after=40)
        else:
            executor = open_candidate(candidate, selection.options)
        opened.append(executor)
        return executor

    def build(strict=False):
        return RankedModel(open_next(accel), accel, Ranking([accel, *cpu]), [], open_next=open_next, strict=strict)

    yield build, cpu, opened
    Unplugged.plugged = True


def inputs_and_answers(model):
    rng = np.random.default_rng(3)
    inputs = [rng.integers(0, 256, model.inputs[0].shape, dtype=np.uint8) for _ in range(8)]
    with edgeaccel.load(MODEL, executor="litert") as cpu:
        answers = [cpu.run(x)[0] for x in inputs]
    return inputs, answers


def test_run_from_16_threads_fails_over_with_no_error_and_no_wrong_answer(accelerated):
    build, cpu, _ = accelerated
    with build() as model:
        assert isinstance(model, RankedModel) and model.executor.device == "FakeNPU"
        inputs, answers = inputs_and_answers(model)

        def call(i):
            k = i % len(inputs)
            return int(not np.array_equal(model.run(inputs[k])[0], answers[k]))

        with ThreadPoolExecutor(THREADS) as pool:
            wrong = sum(pool.map(call, range(THREADS * CALLS)))
        assert wrong == 0
        assert model.executor.name == cpu[0].name.split("@")[0]
        runs = [f for f in model.fallbacks if f.stage == "run"]
        assert len(runs) == 1 and runs[0].failed == "unplugged:FakeNPU" and runs[0].replaced_by == cpu[0].name
        assert "FakeNPU was unplugged" in runs[0].error


def test_submit_from_16_threads_fails_over_too(accelerated):
    build, cpu, _ = accelerated
    with build() as model:
        inputs, answers = inputs_and_answers(model)

        def submit_all(t):
            futures = [(i % len(inputs), model.submit(inputs[i % len(inputs)])) for i in range(t, t + CALLS)]
            return sum(int(not np.array_equal(f.result(timeout=60)[0], answers[k])) for k, f in futures)

        with ThreadPoolExecutor(THREADS) as pool:
            wrong = sum(pool.map(submit_all, range(THREADS)))
        assert wrong == 0 and model.executor.device == "CPU"
        assert [f.failed for f in model.fallbacks if f.stage == "run"] == ["unplugged:FakeNPU"]


def test_strict_lets_the_unplug_reach_the_caller(accelerated):
    build, _, _ = accelerated
    with build(strict=True) as model:
        x = np.zeros(model.inputs[0].shape, np.uint8)
        for _ in range(40):
            model.run(x)
        with pytest.raises(DeviceUnavailableError, match="unplugged"):
            model.run(x)
        assert model.executor.device == "FakeNPU" and not model.fallbacks


def test_a_device_that_comes_back_is_offered_again_only_on_reselect(accelerated):
    build, _, opened = accelerated
    with build() as model:
        x = np.zeros(model.inputs[0].shape, np.uint8)
        for _ in range(45):
            model.run(x)
        assert model.executor.device == "CPU"
        Unplugged.plugged = True  # plugged back in
        for _ in range(20):
            model.run(x)
        assert model.executor.device == "CPU"  # never by itself
        assert model.reselect().device == "FakeNPU"
        assert model.executor.device == "FakeNPU" and model.run(x)[0].shape == model.outputs[0].shape
        assert opened[-1].calls == 1  # the re-opened accelerator serves


def test_reselect_while_the_device_is_still_gone_keeps_the_cpu_and_records_why(accelerated):
    build, _, _ = accelerated
    with build() as model:
        x = np.zeros(model.inputs[0].shape, np.uint8)
        for _ in range(41):
            model.run(x)
        assert model.reselect().device == "CPU"
        last = model.fallbacks[-1]
        assert last.stage == "load" and last.failed == "unplugged:FakeNPU" and "not present" in last.error
        assert model.run(x)[0].shape == model.outputs[0].shape
