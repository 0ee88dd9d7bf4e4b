"""Background calibration: load() serves at once, measures the other candidates in a thread with the accuracy
guard, switches when conclusive, and keeps the measurements for the next load."""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import pytest

import edgeaccel
from edgeaccel.agreement import agreement
from edgeaccel.selection import background
from conftest import MODELS

pytestmark = pytest.mark.shared


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(background, "DELAY_S", 0.05)
    monkeypatch.setattr(background, "BUDGET_S", 1.0)


@pytest.mark.slow
def test_it_serves_at_once_then_measures_and_keeps_what_it_measured(quick, tmp_path):
    x = np.random.default_rng(0).integers(0, 255, (1, 224, 224, 3), dtype=np.uint8)
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", calibrate="background",
                        cache_dir=tmp_path) as model:
        first = model.executor.name
        reference = model.run(x)[0].astype(np.int32)
        status = model.wait_calibration(120)
        assert status.state in ("kept", "switched"), status
        assert status.measurements and status.reason
        after = model.run(x)[0].astype(np.int32)
        if status.state == "switched":  # visible, and within the guard's tolerance of the answer before
            event = model.fallbacks[-1]
            assert event.stage == "calibrate" and event.failed == first
            assert event.replaced_by == model.executor.name and "background calibration" in model.executor.reason
            assert np.argmax(after) == np.argmax(reference)
        else:
            assert model.executor.name == first and not model.fallbacks
    # the next load chooses from the measurements at once, and does not measure again
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", calibrate="background",
                        cache_dir=tmp_path) as again:
        assert again.calibration is None
        assert "measured" in again.executor.reason


def test_closing_stops_it_and_off_means_off(quick, monkeypatch, tmp_path):
    monkeypatch.setattr(background, "DELAY_S", 30.0)
    model = edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", calibrate="background", cache_dir=tmp_path)
    model.close()
    assert model.calibration.state == "stopped"
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", calibrate=False, cache_dir=tmp_path) as model:
        assert model.calibration is None
    # the suite sets EDGEACCEL_CALIBRATE=off: the default then measures nothing
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", cache_dir=tmp_path) as model:
        assert model.calibration is None


def test_one_candidate_has_nothing_to_measure(quick, tmp_path):
    with edgeaccel.load(MODELS / "split_concat.tflite", executor="litert", calibrate="background",
                        cache_dir=tmp_path) as model:
        assert model.calibration is None


@pytest.mark.slow
def test_an_accelerator_the_rules_chose_that_answers_wrong_is_abandoned(quick, tmp_path):
    """The rules put an accelerator first without measuring it; background calibration checks it against the
    CPU reference, finds its answers stray, and moves the model to a candidate that answers right."""
    from edgeaccel.testing.emulated import emulated_accelerator
    from edgeaccel.testing.plugins import installed_plugins

    model_path = MODELS / "mobilenet_v1_0.25_128_quant.tflite"
    x = edgeaccel.image_input(MODELS.parent / "images" / "bird.png", edgeaccel.describe(model_path))
    wrong = emulated_accelerator("wrongnpu", "WrongNPU", "npu", speedup=10, numerics="corrupt")
    with installed_plugins(tmp_path / "plugin", wrong, distribution="emulated-wrong"):
        with edgeaccel.load(model_path, calibrate="background", cache_dir=tmp_path / "cache") as model:
            assert model.executor.runtime == "wrongnpu"  # the rules' choice: an accelerator first
            status = model.wait_calibration(120)
            assert status.state == "switched", status
            assert "wrongnpu" in status.reason and model.executor.runtime != "wrongnpu"
            assert model.fallbacks[-1].stage == "calibrate"
            with edgeaccel.load(model_path, executor="litert", calibrate=False, cache=False) as cpu:
                # the candidate the measurement picked (LiteRT, or OpenVINO when the machine favours it) answers
                # as the CPU reference does, within the guard's tolerance: not bit for bit across runtimes
                check = agreement([cpu.run(x)], [model.run(x)], cpu.outputs, model.outputs)
                assert check.ok, (model.executor, check.why)
                assert check.metrics["max_error_steps"] <= 8


def test_closing_while_it_measures_stops_it_promptly_and_keeps_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(background, "DELAY_S", 0.0)
    monkeypatch.setattr(background, "BUDGET_S", 60.0)  # it would measure for a minute
    model = edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", calibrate="background", cache_dir=tmp_path)
    deadline = time.monotonic() + 60
    while model.calibration.state == "waiting" and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(1.0)  # well into measuring
    started = time.monotonic()
    model.close()
    assert time.monotonic() - started < 10  # the block under way finishes, nothing more
    assert model.calibration.state == "stopped"
    assert not list((tmp_path / "calibration").glob("*.json"))  # a cut-short measurement is not kept


class TicketClock:
    """A simulated clock whose every sleep takes a ticket the test gives (``allow``): the calibration thread makes
    exactly as many waits as the test allows, then stands still where the test can look. Time moves only by
    those sleeps, so what the thread reports waiting is exact, whatever else the machine does."""

    simulated = True

    def __init__(self) -> None:
        self._now = 0.0
        self._tickets = threading.Semaphore(0)
        self._free = threading.Event()

    def now(self) -> float:
        return self._now

    def allow(self, sleeps: int) -> None:
        for _ in range(sleeps):
            self._tickets.release()

    def allow_all(self) -> None:
        self._free.set()
        self._tickets.release()  # the sleep waiting now

    def sleep(self, seconds: float) -> None:
        if not self._free.is_set() and not self._tickets.acquire(timeout=120):
            raise TimeoutError("the test gave no ticket for this sleep")
        self._now += seconds


@contextlib.contextmanager
def serving(model, x):
    """The model run back to back in a thread (a busy server) until the block ends."""
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            model.run(x)

    server = threading.Thread(target=serve)
    server.start()
    try:
        yield
    finally:
        stop.set()
        server.join(30)


def until(condition, what: str, timeout: float = 120.0) -> None:
    """Wait (real time, bounded) for a state the test brings about; the bound only ends a broken run."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.mark.slow
def test_it_waits_while_the_model_serves_and_leaves_the_wait_out_of_its_budget(monkeypatch, tmp_path):
    """Measuring beside a saturated model takes from its requests: the thread holds back while requests run
    (up to YIELD_S in all, on its clock), then measures once the model idles; the wait is reported and is not
    charged to the budget. A ticket clock makes the waits exact: no sleeping, no race with a busy machine."""
    clock = TicketClock()
    monkeypatch.setattr(background, "CLOCK", clock)
    monkeypatch.setattr(background, "BUDGET_S", 1.0)
    monkeypatch.setattr(background, "YIELD_S", 60.0)
    poll = background.YIELD_POLL_S
    x = np.random.default_rng(0).integers(0, 255, (1, 224, 224, 3), dtype=np.uint8)
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", calibrate="background",
                        cache_dir=tmp_path) as model:
        try:
            with serving(model, x):
                until(model.busy, "the model to serve")
                clock.allow(1 + 10)  # the start delay, then ten polls while the model serves
                until(lambda: model.calibration.waited_s >= 10 * poll - 1e-9, "ten polls")
                status = model.calibration  # held at its eleventh poll: nothing measured yet
                assert status.state == "measuring" and not status.measurements, status
                assert "while the model served" in str(status)
        finally:
            until(lambda: not model.busy(), "the model to idle")
            clock.allow_all()
        status = model.wait_calibration(120)  # idle now: the eleventh poll ends and it measures
        assert status.state in ("kept", "switched") and status.measurements, status
        assert status.waited_s == pytest.approx(11 * poll, abs=poll / 2)  # eleven polls, none more


def test_a_model_that_never_idles_is_measured_after_the_longest_wait(monkeypatch, tmp_path):
    """The waits are bounded: after YIELD_S in all (on its clock) it measures beside the requests."""
    clock = TicketClock()
    monkeypatch.setattr(background, "CLOCK", clock)
    monkeypatch.setattr(background, "BUDGET_S", 1.0)
    monkeypatch.setattr(background, "YIELD_S", 20 * background.YIELD_POLL_S)
    x = np.random.default_rng(0).integers(0, 255, (1, 224, 224, 3), dtype=np.uint8)
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", calibrate="background",
                        cache_dir=tmp_path) as model:
        with serving(model, x):
            until(model.busy, "the model to serve")
            clock.allow_all()
            until(lambda: model.calibration.state not in ("waiting", "measuring"), "the measurement")
            status = model.calibration
        assert status.state in ("kept", "switched") and status.measurements, status
        # YIELD_S to within one poll (the last poll may pass it: the clock's sums round)
        assert background.YIELD_S - 1e-6 <= status.waited_s <= background.YIELD_S + background.YIELD_POLL_S + 1e-6
