"""ScheduledModel: the Model API over several executors, with real threads. Simulated executors on the real
clock (short service times) for the scheduling behaviour; the real runtimes on this machine (which has no
thermal sensors) for "keeps serving, with reasons"."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import edgeaccel
from edgeaccel.errors import DeadlineExceededError, DeviceUnavailableError, ExecutorError, ModelClosedError
from edgeaccel.scheduling.clock import MonotonicClock
from edgeaccel.scheduling.model import ScheduledModel
from edgeaccel.sim.executor import SimulatedExecutor
from edgeaccel.sim.heat import DeviceParams
from edgeaccel.sim.world import SimWorld

from conftest import SAMPLES

X = np.zeros((1, 8), np.uint8)


@pytest.fixture
def world(tmp_path):
    clock = MonotonicClock()
    devices = [DeviceParams("accel", layout="apex", r_c_per_w=12.0, c_j_per_c=0.4, idle_w=0.5, busy_w=6.0,
                            service_s=0.002, passive_c=60.0, critical_c=85.0, sensor_step_c=0.25),
               DeviceParams("cpu", layout="cpu", r_c_per_w=3.0, c_j_per_c=2.0, idle_w=2.0, busy_w=10.0,
                            service_s=0.006, passive_c=85.0, critical_c=100.0, energy_range_j=5.0)]
    return SimWorld(devices, tmp_path, t0=clock.now()), clock


def scheduled(world, policy="thermal", **kwargs):
    sim, clock = world
    executors = [SimulatedExecutor(m, clock) for m in sim.models.values()]
    return ScheduledModel(executors, policy, sensors=sim.specs(), root=sim.root, before_sample=sim.sync,
                          sample_interval_s=0.05, **kwargs), executors


def test_model_api_run_submit_close(world):
    model, executors = scheduled(world)
    with model:
        assert [t.name for t in model.inputs] == ["input"] and [t.name for t in model.outputs] == ["output"]
        out = model.run(X)
        assert out["output"].shape == (1, 4)
        futures = [model.submit(X) for _ in range(200)]
        assert all(f.result(timeout=10)[0].shape == (1, 4) for f in futures)
        stats = model.stats
        assert stats.completed == 201 and set(stats.executors) == {"sim:accel", "sim:cpu"}
        assert stats.executors["sim:accel"].completed > stats.executors["sim:cpu"].completed
        assert stats.executors["sim:cpu"].energy_per_inference_j is not None  # RAPL in the fake tree
        assert "no power or energy sensor" in stats.executors["sim:accel"].energy_reason
        assert stats.devices["accel"].last_temp_c is not None
        assert len(model.trace) >= 1 and model.telemetry["cpu"].temp_c is not None
    assert all(e.closed for e in executors)
    model.close()  # idempotent
    with pytest.raises(ModelClosedError):
        model.run(X)


def test_impossible_deadline_fails_fast_with_a_clear_error(world):
    model, _ = scheduled(world, "latency")
    with model:
        with pytest.raises(DeadlineExceededError, match="deadline"):
            model.run(X, deadline=0.0005)  # half a millisecond for a 2 ms run
        assert model.run(X, deadline=1.0)[0].shape == (1, 4)
        with pytest.raises(ValueError, match="positive number of seconds"):
            model.submit(X, deadline=-1)
        assert model.stats.shed == 1


def test_close_fails_queued_requests(world):
    sim, clock = world
    model, _ = scheduled(world, "latency")
    futures = [model.submit(X) for _ in range(3000)]
    model.close()
    outcomes = [f.exception(timeout=10) for f in futures]
    assert any(isinstance(e, ModelClosedError) for e in outcomes)
    assert all(e is None or isinstance(e, ModelClosedError) for e in outcomes)


class Broken(SimulatedExecutor):
    def run(self, inputs):
        raise ExecutorError("the runtime fell over", runtime="simulated")


def test_a_failing_executor_is_retried_elsewhere_then_taken_out_of_rotation(world):
    sim, clock = world
    executors = [Broken(sim.models["accel"], clock), SimulatedExecutor(sim.models["cpu"], clock)]
    with ScheduledModel(executors, "latency", sensors=sim.specs(), root=sim.root, before_sample=sim.sync) as model:
        results = [model.run(X) for _ in range(10)]
        assert all(r[0].shape == (1, 4) for r in results)
        assert len(model.fallbacks) == 3 and all(f.failed == "sim:accel" for f in model.fallbacks)
        assert str(model.fallbacks[0]).startswith("sim:accel failed at run: the runtime fell over -> sim:cpu")
        assert "out of rotation: 3 consecutive failures" in model.executors["sim:accel"].reason
        assert model.stats.executors["sim:cpu"].completed == 10


def test_when_every_executor_fails_the_caller_gets_the_error(world):
    sim, clock = world
    with ScheduledModel([Broken(sim.models["accel"], clock)], "latency", sensors=sim.specs(), root=sim.root) as model:
        with pytest.raises(ExecutorError, match="fell over"):
            model.run(X)


def test_executors_of_different_models_are_refused(world):
    sim, clock = world
    other = SimulatedExecutor(sim.models["cpu"], clock)
    other.model = other.model.__class__(other.model.path, other.model.format,
                                        (edgeaccel.TensorSpec("input", (1, 9), np.dtype(np.uint8)),),
                                        other.model.outputs)
    with pytest.raises(ValueError, match="same input dtypes and shapes"):
        ScheduledModel([SimulatedExecutor(sim.models["accel"], clock), other], "thermal")


def test_real_executors_on_this_machine_keep_serving_without_sensors(tmp_path):
    """edgeaccel.load(..., policy=...) holds every candidate that loads: LiteRT and OpenVINO on this CPU.
    With no sensors the thermal policy serves unthrottled and says why in every decision."""
    path = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"
    with edgeaccel.load(path) as plain:
        spec = plain.inputs[0]
        image = np.random.default_rng(0).integers(0, 255, spec.shape, dtype=np.uint8)
        expected = int(np.argmax(plain.run(image)[0]))
    with edgeaccel.load(path, policy="thermal", telemetry_root=tmp_path) as model:
        assert isinstance(model, edgeaccel.ScheduledModel)
        assert len(model.executors) >= 2 and "litert:CPU" in model.executors
        answers = [int(np.argmax(f.result(timeout=30)[0])) for f in [model.submit(image) for _ in range(40)]]
        assert set(answers) == {expected}
        stats = model.stats
        assert stats.completed == 40 and stats.devices["cpu"].last_temp_c is None
        assert "no CPU temperature" in stats.devices["cpu"].temp_reason
        record = model.trace.records[-1]
        assert record.action == "no_telemetry" and "serving unthrottled" in record.reason
        csv_path = tmp_path / "trace.csv"
        model.trace.to_csv(csv_path)
        assert csv_path.read_text().startswith("time_s,policy,action,reason")


def test_onnx_sessions_stop_spinning_when_a_run_returns_unless_asked():
    from edgeaccel.executors.base import ExecutorOptions
    from edgeaccel.executors.onnxruntime import session_options

    def entry(options, key):
        return session_options(2, options).get_session_config_entry(key)

    assert entry(ExecutorOptions(), "session.force_spinning_stop") == "1"
    mine = ExecutorOptions(runtime_options={"session_config": {"session.force_spinning_stop": "0",
                                                               "session.intra_op.allow_spinning": "0"}})
    assert entry(mine, "session.force_spinning_stop") == "0"  # the caller's own choice stands
    assert entry(mine, "session.intra_op.allow_spinning") == "0"


@pytest.mark.shared
@pytest.mark.parametrize("scheduled", [False, True])
def test_an_idle_onnx_model_burns_no_cpu_after_its_run(scheduled):
    """ONNX Runtime's default workers spin on for ~40 ms of a core after every run (20 of the 20 ms measured
    after a mobilenet_v2 run here): a model called at 30 fps would hold a core busy for nothing, and slow what
    runs next beside it. Loaded or scheduled, ours stop when the run returns."""
    import time

    from conftest import MODELS

    path = MODELS / "mobilenet_v2_1.0_224_quant.onnx"
    model = edgeaccel.schedule(path, "latency", runtime=edgeaccel.RuntimeOptions(performance_hint="latency")) \
        if scheduled else edgeaccel.load(path, executor="onnxruntime")
    try:
        x = np.zeros(model.inputs[0].shape, np.uint8)
        for _ in range(3):
            model.run(x)
        burnt = []
        for _ in range(5):
            model.run(x)
            start = time.process_time()
            time.sleep(0.05)
            burnt.append(time.process_time() - start)
        assert sorted(burnt)[2] < 0.02, f"CPU seconds used in the 50 ms after a run: {burnt}"  # spinning: ~0.05
    finally:
        model.close()


class UnpluggedSim(SimulatedExecutor):
    """A simulated accelerator that answers ``after`` runs, then is gone (DeviceUnavailableError), until
    ``plugged`` is set again."""

    def __init__(self, heat, clock, after):
        super().__init__(heat, clock)
        self.after = after
        self.plugged = True
        self.lock = threading.Lock()

    def run(self, inputs):
        with self.lock:
            self.after -= 1
            if self.after < 0:
                self.plugged = False
            if not self.plugged:
                raise DeviceUnavailableError("the accelerator was unplugged", hint="plug it back in")
        return super().run(inputs)


def test_an_unplugged_executor_fails_over_without_an_error_reaching_a_caller(world):
    """DeviceUnavailableError (not an ExecutorError) used to be wrapped as a contract breach; now it fails over
    like any runtime error, and the executor is back only after reselect()."""
    sim, clock = world
    accel = UnpluggedSim(sim.models["accel"], clock, after=20)
    with ScheduledModel([accel, SimulatedExecutor(sim.models["cpu"], clock)], "latency", sensors=sim.specs(),
                        root=sim.root, before_sample=sim.sync) as model:
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda _: model.run(X, timeout=30), range(16 * 20)))
        assert len(results) == 320 and all(r[0].shape == (1, 4) for r in results)
        assert model.fallbacks and all(f.failed == "sim:accel" and "unplugged" in f.error for f in model.fallbacks)
        assert "out of rotation" in model.executors["sim:accel"].reason
        assert "reselect()" in model.executors["sim:accel"].reason
        accel.plugged, accel.after = True, 10**6
        model.reselect()
        assert "out of rotation" not in model.executors["sim:accel"].reason
        before = model.stats.executors["sim:accel"].completed
        for _ in range(30):
            model.run(X, timeout=30)
        assert model.stats.executors["sim:accel"].completed > before


def test_a_scheduled_model_is_a_model_with_the_same_interface(tmp_path):
    """load(..., policy=...) returns a Model: one base class binds inputs, builds outputs and runs."""
    path = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"
    with edgeaccel.load(path) as plain, edgeaccel.load(path, policy="latency", telemetry_root=tmp_path) as model:
        assert isinstance(model, edgeaccel.Model) and isinstance(plain, edgeaccel.Model)
        assert type(model).run is not type(plain).run  # each runs its own way...
        assert type(model)._finish is type(plain)._finish is edgeaccel.Model._finish  # ...and finishes one way
        for name in ("run", "submit", "stream", "reselect", "close", "inputs", "outputs", "info", "executor",
                     "fallbacks", "ranking", "concurrency"):
            assert hasattr(model, name) and hasattr(plain, name), name
        assert model.inputs == plain.inputs and model.outputs == plain.outputs and model.info == plain.info
        image = np.random.default_rng(1).integers(0, 255, model.inputs[0].shape, dtype=np.uint8)
        top1 = int(np.argmax(plain.run(image)[0]))  # LiteRT and OpenVINO may differ by a quantization step
        by_name = {model.inputs[0].name: image}
        assert int(np.argmax(model(by_name)[0])) == top1  # inputs by name, __call__
        real = model.run(image, dequantize=True)[0]
        assert real.dtype == np.float32 and int(np.argmax(real)) == top1
        streamed = list(model.stream([image] * 5))
        assert [int(np.argmax(s[0])) for s in streamed] == [top1] * 5
        assert [c.name for c in model.ranking.candidates] == [c.name for c in plain.ranking.candidates]
        assert model.reselect() == model.executor


def test_a_throughput_executor_keeps_its_concurrency(tmp_path):
    """ScheduledModel used to pin every executor to one request at a time."""
    path = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"
    with edgeaccel.load(path, policy="thermal", performance_hint="throughput", telemetry_root=tmp_path) as model:
        slots = model._scheduler.slots
        assert all(s.max_concurrency == s.executor.concurrency for s in slots)
        assert model.concurrency == sum(s.executor.concurrency for s in slots)
        assert model.trace.records[-1].concurrency == {s.name: s.max_concurrency for s in slots}


class Wide(SimulatedExecutor):
    """A simulated executor that takes four requests at once, and counts how many it holds."""

    def __init__(self, heat, clock):
        super().__init__(heat, clock)
        self.lock, self.now, self.most = threading.Lock(), 0, 0

    @property
    def concurrency(self):
        return 4

    def run(self, inputs):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            return super().run(inputs)
        finally:
            with self.lock:
                self.now -= 1


def test_requests_overlap_up_to_the_executors_concurrency(world):
    sim, clock = world
    wide = Wide(sim.models["cpu"], clock)
    with ScheduledModel([wide], "latency", sensors=sim.specs(), root=sim.root, before_sample=sim.sync) as model:
        assert model.concurrency == 4
        futures = [model.submit(X) for _ in range(200)]
        assert all(f.result(timeout=30)[0].shape == (1, 4) for f in futures)
    assert 2 <= wide.most <= 4


@pytest.mark.slow
def test_a_program_that_exits_with_requests_in_flight_ends_without_a_traceback():
    """Leaving requests unawaited at exit is a user's everyday mistake: the queued ones fail with
    ModelClosedError as the interpreter shuts down, and no scheduler thread prints a traceback."""
    script = ("import numpy as np, edgeaccel\n"
              f"m = edgeaccel.load({str(SAMPLES / 'mobilenet_v1_0.25_128_quant.tflite')!r}, policy='thermal')\n"
              "x = np.zeros(m.inputs[0].shape, m.inputs[0].dtype)\n"
              "futures = [m.submit(x) for _ in range(200)]\n"
              "futures[0].result()\n"
              "print('exiting')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "EDGEACCEL_CALIBRATE": "off"})
    assert done.returncode == 0 and "exiting" in done.stdout
    assert "Traceback" not in done.stderr, done.stderr
