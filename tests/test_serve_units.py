"""The pieces of `edgeaccel serve` without a server: the model repository's rules, protocol tensors, the bind
and token rules, the device gate's limit and priority order, and dynamic batching on a real ONNX model with a
dynamic batch dimension (ONNX Runtime / OpenVINO answers, checked against numpy)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from conftest import MODELS
from edgeaccel.errors import ConfigError
from edgeaccel.serve.errors import ServeError
from edgeaccel.serve.gate import DeviceGate
from edgeaccel.serve.repository import ModelRepository
from edgeaccel.serve.security import authorized, check_bind, is_loopback
from edgeaccel.serve.tensors import from_bytes, from_json, to_bytes


# -- repository ----------------------------------------------------------------------------------------------
def test_repository_names_models_by_folder_and_stem_and_ignores_the_rest(tmp_path):
    (tmp_path / "a.tflite").write_bytes(b"x")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "m.onnx").write_bytes(b"x")
    (tmp_path / "c.xml").write_text("<net/>")
    (tmp_path / "c.bin").write_bytes(b"w")  # an IR's weights: not a model of its own
    (tmp_path / "labels.txt").write_text("x")
    (tmp_path / ".hidden.tflite").write_bytes(b"x")
    (tmp_path / "a.onnx").write_bytes(b"x")  # the same stem: another artifact of model a
    entries = ModelRepository(tmp_path).entries()
    assert set(entries) == {"a", "b", "c"}
    assert entries["b"].source == (tmp_path / "b").resolve() and all(e.problem is None for e in entries.values())
    assert entries["a"].source == [(tmp_path / "a.onnx").resolve(), (tmp_path / "a.tflite").resolve()]
    (tmp_path / "b.tflite").write_bytes(b"x")
    assert "both a folder and a file" in ModelRepository(tmp_path).entries()["b"].problem


def test_repository_refuses_paths_and_escapes(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.tflite").write_bytes(b"x")
    root = tmp_path / "models"
    root.mkdir()
    (root / "ok.tflite").write_bytes(b"x")
    (root / "inside.tflite").symlink_to(root / "ok.tflite")  # a link that stays inside is fine
    (root / "out.tflite").symlink_to(outside / "secret.tflite")
    (root / "folder").mkdir()
    (root / "folder" / "m.tflite").symlink_to(outside / "secret.tflite")  # an escape inside a folder
    repo = ModelRepository(root)
    assert repo.resolve("inside").problem is None
    assert "outside the model repository" in repo.resolve("out").problem
    assert "folder/m.tflite is a symlink" in repo.resolve("folder").problem
    for name, status in (("../outside/secret", 400), ("/etc/passwd", 400), ("..", 400), ("nope", 404)):
        with pytest.raises(ServeError) as err:
            repo.resolve(name)
        assert err.value.status == status
    with pytest.raises(ServeError, match="not a folder"):
        ModelRepository(root / "ok.tflite")


# -- tensors ---------------------------------------------------------------------------------------------------
def test_tensors_from_json_and_bytes_round_trip():
    assert from_json([[0.25, -1e30]], "FP32", [1, 2], "x").tolist() == [[0.25, np.float32(-1e30)]]
    assert from_json([1.0, 255], "UINT8", [2], "x").tolist() == [1, 255]  # whole floats are whole numbers
    assert from_json([[True, False]], "BOOL", [1, 2], "x").dtype == np.bool_
    assert from_json([], "FP32", [0], "x").shape == (0,)
    array = np.arange(6, dtype=np.int16).reshape(2, 3)
    assert np.array_equal(from_json([[0, 1, 2], [3, 4, 5]], "INT16", [2, 3], "x"), array)
    assert np.array_equal(from_json(list(range(6)), "INT16", [2, 3], "x"), array)
    back = from_bytes(to_bytes(array), "INT16", [2, 3], "x")
    assert back.dtype == np.int16 and np.array_equal(back, array)


@pytest.mark.parametrize("call,words", [
    (lambda: from_json([1, 2, 3], "FP32", [2, 2], "input 'x'"), "holds 3 values, shape [2, 2] needs 4"),
    (lambda: from_json(["a"], "FP32", [1], "input 'x'"), "does not hold FP32"),
    (lambda: from_json([1], "FLOAT", [1], "input 'x'"), "not one of BOOL"),
    (lambda: from_json([1], "BYTES", [1], "input 'x'"), "BYTES (string) tensors are not served"),
    (lambda: from_json([1], "FP32", [-1], "input 'x'"), "non-negative integers"),
    (lambda: from_json([1], "FP32", [True], "input 'x'"), "non-negative integers"),
    (lambda: from_json([1], "FP32", "1", "input 'x'"), "non-negative integers"),
    (lambda: from_bytes(b"abc", "FP32", [1], "input 'x'"), "3 bytes of tensor data, FP32 of shape [1] needs 4"),
    # values the datatype would silently change, or that every runtime runs on and answers NaN or nonsense for
    (lambda: from_json([float("nan"), 1.0], "FP32", [2], "input 'x'"), "holds NaN or infinity"),
    (lambda: from_json([float("inf")], "FP16", [1], "input 'x'"), "holds NaN or infinity"),
    (lambda: from_json([1e39], "FP32", [1], "input 'x'"), "a number beyond FP32's range"),
    (lambda: from_bytes(np.array([0, np.nan], np.float32).tobytes(), "FP32", [2], "input 'x'"), "NaN or infinity"),
    (lambda: from_json([float("inf")], "INT32", [1], "input 'x'"), "NaN or infinity"),
    (lambda: from_json([True, False], "UINT8", [2], "input 'x'"), "holds true/false, and UINT8 takes numbers"),
    (lambda: from_json([300, 1], "UINT8", [2], "input 'x'"), "holds 300, outside UINT8's range 0..255"),
    (lambda: from_json([[-1, 1]], "UINT16", [1, 2], "input 'x'"), "holds -1, outside UINT16's range 0..65535"),
    (lambda: from_json([0.5, 1], "INT8", [2], "input 'x'"), "holds fractions such as 0.5"),
    (lambda: from_json([[1, 2], [3]], "INT8", [3], "input 'x'"), "not a list of numbers nested as the shape"),
    (lambda: from_json([2 ** 70], "INT64", [1], "input 'x'"), "does not hold INT64 values only"),
])
def test_tensor_errors_say_what_is_wrong(call, words):
    with pytest.raises(ServeError) as err:
        call()
    assert err.value.status == 400 and words in err.value.message and "input 'x'" in err.value.message


# -- security --------------------------------------------------------------------------------------------------
def test_loopback_needs_no_token_anything_else_does():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("myhost")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "x" * 32)
    with pytest.raises(ConfigError, match="without authentication") as err:
        check_bind("0.0.0.0", None)
    assert "--token" in err.value.hint
    with pytest.raises(ConfigError, match="too short"):
        check_bind("::", "short")


def test_authorization_header():
    token = "t" * 20
    assert authorized(None, None)
    assert authorized(f"Bearer {token}", token) and authorized(f"bearer {token}".encode(), token)
    assert not authorized(None, token) and not authorized(token, token) and not authorized("Bearer x", token)
    assert not authorized(f"Basic {token}", token)


# -- the device gate -----------------------------------------------------------------------------------------
def test_gate_holds_a_device_to_its_limit_and_lets_higher_priority_in_first():
    gate = DeviceGate()
    gate.register("edgetpu", 1)
    gate.register("cpu", 2)
    assert gate.limit("edgetpu") == 1 and gate.limit("cpu") == 2
    order: list[int] = []
    holder = gate.hold("edgetpu", 0)
    holder.__enter__()

    def wait(priority: int) -> None:
        with gate.hold("edgetpu", priority):
            order.append(priority)

    threads = []
    for priority in (0, 5, 1):  # arrive in this order, all while the device is held
        threads.append(threading.Thread(target=wait, args=(priority,)))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while gate.snapshot()["edgetpu"]["waiting"] < len(threads) and time.monotonic() < deadline:
            time.sleep(0.001)
    assert gate.snapshot()["edgetpu"]["waiting"] == 3
    holder.__exit__(None, None, None)
    for t in threads:
        t.join(10)
    assert order == [5, 1, 0]
    snap = gate.snapshot()["edgetpu"]
    assert snap["peak"] == 1 and snap["runs"] == 4 and snap["running"] == 0


def test_gate_holds_every_model_on_a_device_to_the_lowest_duty_a_policy_asks():
    now = [100.0]
    duties = {"a": 0.5, "b": 1.0}
    gate = DeviceGate(clock=lambda: now[0])
    for model in duties:
        gate.register("edgetpu", 1, lambda model=model: duties[model])
    assert gate.duty("edgetpu") == 0.5
    with gate.hold("edgetpu"):
        # a 1 s run at duty 0.5: the bank (0.25 busy-s) and what it earned meanwhile (0.5) leave it 0.25 short,
        # so the device rests 0.5 s before any model's next run
        now[0] += 1.0
    started = threading.Event()

    def next_run():
        with gate.hold("edgetpu", priority=9):
            started.set()

    thread = threading.Thread(target=next_run)
    thread.start()
    assert not started.wait(0.3)  # held back by the budget (on the gate's clock, which has not moved)
    assert gate.snapshot()["edgetpu"]["waiting"] == 1
    now[0] += 0.5
    assert started.wait(10)
    thread.join(10)
    duties["a"] = None  # model a unloaded: its policy no longer counts
    assert gate.duty("edgetpu") == 1.0


def test_gate_limit_from_the_command_line_wins():
    gate = DeviceGate({"CPU": 3})
    gate.register("cpu", 1)
    assert gate.limit("cpu") == 3
    with pytest.raises(ValueError, match="at least 1"):
        DeviceGate({"cpu": 0})


# -- dynamic batching ------------------------------------------------------------------------------------------
def _dynamic_batch_model(path):
    from onnx import TensorProto, helper

    from onnx_models import save

    weight = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    return save([helper.make_node("MatMul", ["x", "W"], ["y"])],
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])], {"W": weight}, path), weight


def test_requests_for_a_dynamic_batch_model_run_as_one_batch_with_right_answers(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("prometheus_client")
    from edgeaccel.serve.core import ServeCore, ServeOptions
    from edgeaccel.serve.metrics import Metrics

    (tmp_path / "models").mkdir()
    _, weight = _dynamic_batch_model(tmp_path / "models" / "dyn.onnx")
    metrics = Metrics()
    core = ServeCore(ModelRepository(tmp_path / "models"),
                     ServeOptions(policy="latency", max_batch=8, batch_window_ms=300), metrics)
    metrics.attach(core)
    try:
        served = core.load("dyn")
        assert "batched dynamically" in served.batching
        config = core.config("dyn")  # Triton's form: the batch dimension is max_batch_size, not in dims
        assert config["max_batch_size"] == 8 and config["input"] == [{"name": "x", "data_type": "TYPE_FP32",
                                                                       "dims": [4]}]
        rng = np.random.default_rng(0)
        requests = [rng.standard_normal((rows, 4)).astype(np.float32) for rows in (1, 2, 1)]
        futures = [core.infer("dyn", {"x": x}) for x in requests]
        for x, future in zip(requests, futures, strict=True):
            y = future.result(timeout=30)["y"]
            assert y.shape == (x.shape[0], 3)
            np.testing.assert_allclose(y, x @ weight, rtol=1e-5, atol=1e-5)
        sample = metrics.registry.get_sample_value
        assert sample("edgeaccel_serve_batch_size_count", {"model": "dyn"}) == 1  # one run for three requests
        assert sample("edgeaccel_serve_batch_size_sum", {"model": "dyn"}) == 4
        # a request whose other dimensions differ is refused alone, before any batch (a 400, not a failed batch)
        with pytest.raises(ServeError, match="expects shape"):
            core.infer("dyn", {"x": np.zeros((1, 5), np.float32)})
    finally:
        core.close()


@pytest.mark.shared
def test_a_fixed_batch_model_is_not_batched_and_says_why():
    import edgeaccel
    from edgeaccel.serve.batching import batchable

    ok, why = batchable(edgeaccel.describe(MODELS / "mobilenet_v2_1.0_224_quant.tflite"))
    assert not ok and "fixed batch of 1" in why


# -- metrics from the scheduler's telemetry ------------------------------------------------------------------
@pytest.mark.shared
def test_metrics_show_the_device_temperature_the_scheduler_reads(tmp_path):
    import shutil

    pytest.importorskip("prometheus_client")
    from edgeaccel.serve.core import ServeCore, ServeOptions
    from edgeaccel.serve.metrics import Metrics
    from edgeaccel.testing import FakeTree

    FakeTree(tmp_path / "sys").thermal_zone(0, "x86_pkg_temp", 61500, [("passive", 95000), ("critical", 105000)])
    (tmp_path / "models").mkdir()
    shutil.copy(MODELS / "split_concat.tflite", tmp_path / "models" / "tiny.tflite")
    metrics = Metrics()
    core = ServeCore(ModelRepository(tmp_path / "models"),
                     ServeOptions(policy="thermal", telemetry_root=str(tmp_path / "sys")), metrics)
    metrics.attach(core)
    try:
        served = core.load("tiny")
        arrays = {t.name: np.zeros(t.shape, t.dtype) for t in served.model.inputs}
        core.infer("tiny", arrays).result(timeout=30)
        text = metrics.render()[0].decode()
    finally:
        core.close()
    assert 'edgeaccel_serve_device_temperature_celsius{device="cpu"} 61.5' in text
    assert 'edgeaccel_serve_device_throttled_seconds{device="cpu"}' in text
    assert "edgeaccel_serve_queue_depth 0.0" in text


@pytest.mark.shared
def test_a_hot_device_is_duty_cycled_for_all_its_models_together(tmp_path):
    import shutil

    pytest.importorskip("prometheus_client")
    from edgeaccel.serve.core import ServeCore, ServeOptions
    from edgeaccel.serve.metrics import Metrics
    from edgeaccel.testing import FakeTree

    FakeTree(tmp_path / "sys").thermal_zone(0, "x86_pkg_temp", 99000, [("passive", 85000), ("critical", 105000)])
    (tmp_path / "models").mkdir()
    for name in ("a", "b"):
        shutil.copy(MODELS / "split_concat.tflite", tmp_path / "models" / f"{name}.tflite")
    metrics = Metrics()
    core = ServeCore(ModelRepository(tmp_path / "models"),
                     ServeOptions(policy="thermal", telemetry_root=str(tmp_path / "sys")), metrics)
    metrics.attach(core)
    try:
        for name in ("a", "b"):
            core.load(name)
        wanted = [core.get(name).model.trace.records[-1].duty["cpu"] for name in ("a", "b")]
        assert max(wanted) < 1.0  # 14 C above the passive trip: each policy duty-cycles the CPU
        assert core.gate.duty("cpu") == min(wanted)  # and the gate holds both models to it together
        text = metrics.render()[0].decode()
        assert f'edgeaccel_serve_device_duty{{device="cpu"}} {min(wanted)}' in text
        core.unload("a")
        core.unload("b")
        assert core.gate.duty("cpu") == 1.0  # no model left to ask for less
    finally:
        core.close()
