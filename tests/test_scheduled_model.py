"""ScheduledModel: the Model API over several executors, with real threads. Simulated executors on the real
clock (short service times) for the scheduling behaviour; the real runtimes on this machine (which has no
thermal sensors) for "keeps serving, with reasons"."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from edgeaccel.errors import DeadlineExceededError, ExecutorError, ModelClosedError
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


def test_scheduled_onnx_sessions_do_not_spin_unless_asked():
    from edgeaccel.executors.base import ExecutorOptions
    from edgeaccel.executors.onnxruntime import OnnxRuntimeExecutor
    from edgeaccel.scheduling.open import scheduled_options

    quiet = scheduled_options(ExecutorOptions(), OnnxRuntimeExecutor)
    assert quiet.runtime_options["session_config"]["session.intra_op.allow_spinning"] == "0"
    mine = scheduled_options(ExecutorOptions(runtime_options={"session_config": {
        "session.intra_op.allow_spinning": "1"}, "max_interpreters": 2}), OnnxRuntimeExecutor)
    assert mine.runtime_options["session_config"]["session.intra_op.allow_spinning"] == "1"
    assert mine.runtime_options["max_interpreters"] == 2
