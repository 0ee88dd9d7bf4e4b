"""load()'s option objects (edgeaccel.options), the older keywords they replace, edgeaccel.schedule(), and the
one way an executor declares its devices (device_specs), with the older ways still accepted and warned about.

Every model here is built by the test (a small ONNX convolution) and runs on ONNX Runtime or OpenVINO on the
CPU: no shared files are needed."""

from __future__ import annotations

import os
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import edgeaccel
from edgeaccel import ConfigError, RuntimeOptions, ScheduleOptions, SelectionOptions, TaskOptions
from edgeaccel.executors import DeviceSpec, Executor
from edgeaccel.executors.base import ExecutorOptions
from edgeaccel.executors.registry import check_plugin
from edgeaccel.testing.conformance import ExecutorConformance
from onnx_models import small_conv

QUIET = SelectionOptions(calibrate=False)  # no background measuring: each test says what it loads


@pytest.fixture(scope="module")
def conv(tmp_path_factory) -> Path:
    return small_conv(tmp_path_factory.mktemp("conv") / "conv.onnx")


def _input(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 16, 16)).astype(np.float32)


def _ours(caught) -> list[str]:
    """edgeaccel's deprecation messages among the warnings caught (a runtime's own are not ours to judge)."""
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)
            and "deprecated" in str(w.message) and "edgeaccel" in str(w.message)]


# -- each option object validates, saying what to write ----------------------------------------------------------

WRONG = [
    (SelectionOptions, {"precision": "fp16"}, "precision", "SelectionOptions(precision="),
    (SelectionOptions, {"goal": "speed"}, "goal", "SelectionOptions(goal="),
    (SelectionOptions, {"calibrate": "yes"}, "calibrate", "SelectionOptions(calibrate="),
    (SelectionOptions, {"calibration_inputs": "bird.png"}, "calibration_inputs", "calibration_inputs=[["),
    (SelectionOptions, {"calibration_budget_s": 0}, "calibration_budget_s", "calibration_budget_s=30"),
    (SelectionOptions, {"accuracy_tolerance": -0.1}, "accuracy_tolerance", "accuracy_tolerance=0.05"),
    (SelectionOptions, {"accuracy_tolerance": float("nan")}, "accuracy_tolerance", "accuracy_tolerance=0.05"),
    (SelectionOptions, {"strict": "true"}, "strict", "strict=True"),
    (SelectionOptions, {"profile": 3}, "profile", "profile='rpi5-coral-usb'"),
    (SelectionOptions, {"profile": {"name": "rpi5"}}, "profile", "profile='rpi5-coral-usb'"),
    (RuntimeOptions, {"threads": 0}, "threads", "RuntimeOptions(threads=4)"),
    (RuntimeOptions, {"threads": 2.5}, "threads", "RuntimeOptions(threads=4)"),
    (RuntimeOptions, {"threads": True}, "threads", "RuntimeOptions(threads=4)"),
    (RuntimeOptions, {"performance_hint": "fast"}, "performance_hint", "performance_hint='throughput'"),
    (RuntimeOptions, {"gpu_mem_limit_mb": -1}, "gpu_mem_limit_mb", "gpu_mem_limit_mb=2048"),
    (RuntimeOptions, {"gpu_mem_limit_mb": "2G"}, "gpu_mem_limit_mb", "gpu_mem_limit_mb=2048"),
    (RuntimeOptions, {"gpu_mem_limit_mb": float("inf")}, "gpu_mem_limit_mb", "gpu_mem_limit_mb=2048"),
    (RuntimeOptions, {"cache": "no"}, "cache", "cache=False"),
    (RuntimeOptions, {"cache_dir": 5}, "cache_dir", "cache_dir="),
    (RuntimeOptions, {"isolate": "yes"}, "isolate", "isolate=IsolationLimits("),
    (RuntimeOptions, {"isolate": {"run_timeout": 5}}, "isolate", "isolate=IsolationLimits("),
    (RuntimeOptions, {"native": [("a", 1)]}, "native", "native={"),
    (ScheduleOptions, {"policy": ""}, "policy", "policy='thermal'"),
    (ScheduleOptions, {"policy": 3}, "policy", "policy='thermal'"),
    (ScheduleOptions, {"power_budget_w": 0}, "power_budget_w", "power_budget_w=5"),
    (ScheduleOptions, {"max_executors": 0}, "max_executors", "max_executors=2"),
    (ScheduleOptions, {"telemetry_root": None}, "telemetry_root", "telemetry_root='/'"),
    (TaskOptions, {"conf": 1.5}, "conf", "conf=0.25"),
    (TaskOptions, {"iou": -0.1}, "iou", "iou=0.25"),
    (TaskOptions, {"max_det": 0}, "max_det", "max_det=100"),
    (TaskOptions, {"top_k": "5"}, "top_k", "top_k=5"),
    (TaskOptions, {"letterbox": "yes"}, "letterbox", "letterbox=True"),
    (TaskOptions, {"normalize": 255}, "normalize", "normalize='imagenet'"),
    (TaskOptions, {"imgsz": (0, 640)}, "imgsz", "imgsz=(480, 640)"),
    (TaskOptions, {"imgsz": (1, 2, 3)}, "imgsz", "imgsz=(480, 640)"),
    (TaskOptions, {"labels": 7}, "labels", "labels='coco.txt'"),
    (TaskOptions, {"decoder": "yolov8"}, "decoder", "decoder={'layout': 'yolov8'}"),
]


@pytest.mark.parametrize(("cls", "given", "key", "fix"), WRONG,
                         ids=[f"{c.__name__}-{k}-{list(g.values())[0]!r}" for c, g, k, _ in WRONG])
def test_a_wrong_option_is_a_config_error_saying_what_to_write(cls, given, key, fix):
    with pytest.raises(ConfigError) as caught:
        cls(**given)
    assert caught.value.key == key
    assert f"{cls.__name__}({key}=" in caught.value.message  # what was wrong, as it was written
    assert caught.value.hint.startswith(f"write {cls.__name__}(") and fix in caught.value.hint


def test_a_changed_copy_is_validated_again():
    runtime = RuntimeOptions(threads=2)
    assert replace(runtime, threads=4).threads == 4
    with pytest.raises(ConfigError, match="threads"):
        replace(runtime, threads=-4)


def test_options_are_normalized_once_where_they_are_built(tmp_path):
    native = {"session_config": {"a": "1"}}
    runtime = RuntimeOptions(cache_dir=tmp_path, gpu_mem_limit_mb=512, native=native)
    native["later"] = True  # the caller's dict changing later changes nothing loaded
    assert runtime.cache_dir == os.fspath(tmp_path) and runtime.gpu_mem_limit_mb == 512.0
    assert "later" not in runtime.native
    from edgeaccel.opening import isolation_of

    assert isolation_of(RuntimeOptions(isolate=True)) == edgeaccel.IsolationLimits()
    assert isolation_of(RuntimeOptions()) is None
    limits = edgeaccel.IsolationLimits(run_timeout=5)
    assert isolation_of(RuntimeOptions(isolate=limits)) is limits
    task = TaskOptions(labels=tmp_path / "l.txt", imgsz=[480, 640], conf=0.3, decoder={"layout": "yolov8"})
    assert task.labels == os.fspath(tmp_path / "l.txt") and task.imgsz == (480, 640)
    assert task.decoding() == {"layout": "yolov8", "conf": 0.3, "imgsz": (480, 640)} and task.given
    assert not TaskOptions().given
    assert SelectionOptions(precision="auto").pins_precision is False
    assert SelectionOptions(precision="f32").pins_precision is True


def test_the_older_task_options_dict_maps_named_keys_to_fields_and_the_rest_to_the_decoder():
    task = TaskOptions.from_dict({"conf": 0.4, "imgsz": "480x640", "anchors": "face_short_range"}, labels=["a"])
    assert (task.conf, task.imgsz, task.labels, task.decoder) == (0.4, "480x640", ["a"],
                                                                 {"anchors": "face_short_range"})
    with pytest.raises(ConfigError, match="conf"):
        TaskOptions.from_dict({"conf": 7})


# -- ExecutorOptions takes the same object -----------------------------------------------------------------------

def test_executor_options_hold_runtime_options_and_read_them_through():
    options = ExecutorOptions(RuntimeOptions(threads=3, gpu_mem_limit_mb=100, native={"k": 1},
                                             cache_dir="/tmp/x"), precision="f16")
    assert (options.threads, options.gpu_mem_limit_mb, options.runtime_options, options.cache_dir,
            options.precision) == (3, 100.0, {"k": 1}, "/tmp/x", "f16")
    assert ExecutorOptions(RuntimeOptions(cache=False, cache_dir="/tmp/x")).cache_dir is None
    assert options.with_runtime(performance_hint="throughput").throughput
    assert replace(options, precision=None).runtime == options.runtime
    with pytest.raises(ConfigError, match="RuntimeOptions"):
        ExecutorOptions({"threads": 2})


def test_executor_options_old_keywords_warn_and_still_work():
    with pytest.warns(DeprecationWarning, match=r"ExecutorOptions\(RuntimeOptions\(threads=2, native=") as caught:
        options = ExecutorOptions(threads=2, runtime_options={"k": 1}, precision="bf16")
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert (options.threads, options.runtime_options, options.precision) == (2, {"k": 1}, "bf16")
    with pytest.raises(TypeError, match="thread"):
        ExecutorOptions(thread=2)


# -- load(): old keywords warn, with the new spelling, and load the same -------------------------------------------

def test_old_keywords_warn_naming_the_new_spelling_and_load_the_same(conv):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with edgeaccel.load(conv, executor="onnxruntime", threads=1, cache=False, calibrate=False,
                            precision="f32") as old:
            old_out, old_info = old.run(_input())[0], old.executor
    messages = _ours(caught)
    assert len(messages) == 1, messages  # one warning per call, every moved keyword in it
    assert "selection=SelectionOptions(calibrate=False, precision='f32')" in messages[0]
    assert "runtime=RuntimeOptions(threads=1, cache=False)" in messages[0]
    assert [w.filename for w in caught if str(w.message) == messages[0]] == [__file__]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with edgeaccel.load(conv, executor="onnxruntime", selection=replace(QUIET, precision="f32"),
                            runtime=RuntimeOptions(threads=1, cache=False)) as new:
            new_out, new_info = new.run(_input())[0], new.executor
    assert _ours(caught) == []
    assert (old_info.runtime, old_info.device, old_info.threads, old_info.precision) == \
        (new_info.runtime, new_info.device, new_info.threads, new_info.precision)
    assert new_info.threads == 1
    np.testing.assert_array_equal(old_out, new_out)


def test_an_old_keyword_laid_over_an_object_wins_and_is_said(conv):
    with pytest.warns(DeprecationWarning, match="threads="):
        with edgeaccel.load(conv, executor="onnxruntime", selection=QUIET,
                            runtime=RuntimeOptions(threads=2, cache=False), threads=1) as model:
            assert model.executor.threads == 1


def test_an_old_keyword_with_a_wrong_value_is_the_objects_config_error(conv):
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigError, match="gpu_mem_limit_mb") as caught:
        edgeaccel.load(conv, gpu_mem_limit_mb=-5)
    assert "RuntimeOptions(gpu_mem_limit_mb=2048" in caught.value.hint


def test_a_wrong_object_or_keyword_fails_before_anything_loads(conv):
    with pytest.raises(ConfigError, match=r"load\(runtime=...\) takes a RuntimeOptions, not dict") as caught:
        edgeaccel.load(conv, runtime={"threads": 2})
    assert "runtime=RuntimeOptions(threads=2)" in caught.value.hint
    with pytest.raises(ConfigError, match="SelectionOptions"):
        edgeaccel.select(conv, selection=RuntimeOptions())
    with pytest.raises(TypeError, match="'thread'; did you mean 'threads'"):
        edgeaccel.load(conv, thread=2)


def test_select_takes_the_same_objects(conv):
    chosen = edgeaccel.select(conv, executor="onnxruntime", selection=replace(QUIET, precision="f32"),
                              runtime=RuntimeOptions(threads=1, cache=False, gpu_mem_limit_mb=64))
    assert chosen.options.threads == 1 and chosen.options.gpu_mem_limit_mb == 64.0
    assert chosen.options.cache_dir is None  # cache=False keeps nothing
    assert chosen.ranking.candidates[0].runtime == "onnxruntime"
    with pytest.warns(DeprecationWarning, match=r"select\(threads=, cache=\)"):
        again = edgeaccel.select(conv, executor="onnxruntime", threads=1, cache=False)
    assert again.options.threads == 1


# -- schedule() ----------------------------------------------------------------------------------------------------

def test_schedule_returns_a_scheduled_model_answering_like_load_with_policy(conv):
    common = dict(selection=QUIET, runtime=RuntimeOptions(threads=1, cache=False))
    x = _input(1)
    with edgeaccel.schedule(conv, "latency", **common) as scheduled:
        assert isinstance(scheduled, edgeaccel.ScheduledModel)
        new_names, new_out = sorted(scheduled.executors), scheduled.run(x)[0]
    with pytest.warns(DeprecationWarning, match=r"edgeaccel.schedule\(model, 'latency'"):
        old = edgeaccel.load(conv, policy="latency", **common)
    with old:
        assert isinstance(old, edgeaccel.ScheduledModel)
        old_names, old_out = sorted(old.executors), old.run(x)[0]
    assert new_names == old_names and new_names
    with edgeaccel.load(conv, **common) as plain:  # and as one executor answers
        np.testing.assert_allclose(new_out, plain.run(x)[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(new_out, old_out, rtol=1e-4, atol=1e-5)


def test_schedule_takes_schedule_options_and_a_power_budget(conv):
    plan = ScheduleOptions("power", power_budget_w=50, max_executors=1)
    with edgeaccel.schedule(conv, plan, selection=QUIET, runtime=RuntimeOptions(cache=False)) as scheduled:
        assert len(scheduled.executors) == 1
    with edgeaccel.schedule(conv, "power", power_budget_w=50, selection=QUIET,
                            runtime=RuntimeOptions(cache=False)) as scheduled:
        assert scheduled.run(_input())[0].shape == (1, 8)


@pytest.mark.parametrize(("policy", "words"), [("nope", "unknown policy 'nope'"), ("power", "needs a budget"),
                                               (42, "takes a policy name or a ScheduleOptions")])
def test_schedule_refuses_a_wrong_policy_before_loading(conv, policy, words):
    with pytest.raises(ConfigError, match=words) as caught:
        edgeaccel.schedule(conv, policy)
    assert "edgeaccel.schedule(model, " in caught.value.hint


# -- one way to declare an executor's devices ----------------------------------------------------------------------

def _declare(**attributes) -> type[Executor]:
    namespace = {"runtime": "declared", "formats": frozenset({edgeaccel.Format.ONNX}), **attributes,
                 "availability": classmethod(lambda cls, device=None: None), "info": property(lambda self: None),
                 "run": lambda self, inputs: [], "close": lambda self: None}
    return type("Declared", (Executor,), namespace)


def test_device_specs_is_the_one_declaration_and_the_rest_is_derived():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        cls = _declare(device_specs=(DeviceSpec("CPU", "cpu"), DeviceSpec("Acme", "npu", precisions=("f16",)),
                                     DeviceSpec("Later", "npu", planned=True)))
    assert cls.devices == ("CPU", "Acme") and cls.device_kinds == {"CPU": "cpu", "Acme": "npu"}
    assert cls.targets == cls.device_specs and cls.target("Later").planned and cls.kind_of("Acme:1") == "npu"
    assert cls.devices_declared_as == "device_specs"
    check_plugin(cls, "test:Declared")


@pytest.mark.parametrize(("old", "expected"), [
    ({"device_kinds": {"Acme": "npu"}}, "DeviceSpec('Acme', 'npu')"),
    ({"targets": (DeviceSpec("Acme", "npu"),)}, "DeviceSpec('Acme', 'npu')"),
    ({"devices": ("CPU",)}, "DeviceSpec('CPU', 'cpu')"),
])
def test_an_older_declaration_still_works_and_warns_with_the_new_spelling(old, expected):
    with pytest.warns(DeprecationWarning, match=r"declares its devices as `") as caught:
        cls = _declare(**old)
    assert f"device_specs = ({expected},)" in str(caught[0].message) and caught[0].filename == __file__
    name = expected.split("'")[1]
    assert cls.devices == (name,) and cls.device_specs[0].name == name
    assert cls.devices_declared_as == next(iter(old))
    check_plugin(cls, "test:Declared")


def test_devices_without_kinds_are_refused_by_the_registry_saying_how_to_declare_them():
    with pytest.warns(DeprecationWarning, match=r"DeviceSpec\('Acme', '<kind>'\)"):
        cls = _declare(devices=("CPU", "Acme"))
    with pytest.raises(ConfigError, match="without their kinds"):
        check_plugin(cls, "test:Declared")


def test_device_specs_of_another_type_are_refused_by_the_registry():
    cls = _declare(device_specs=(("Acme", "npu"),))
    with pytest.raises(ConfigError, match=r"device_specs must be DeviceSpec\(name, kind\)"):
        check_plugin(cls, "test:Declared")


OLD_STYLE_PLUGIN = '''
from edgeaccel import ModelClosedError
from edgeaccel.executors import Availability, Executor, ExecutorInfo, Format, translate


class OldStyleNPU(Executor):
    """A plug-in written before device_specs: its devices as device_kinds. ONNX Runtime stands in for a driver."""

    runtime = "old-style-npu"
    formats = frozenset({Format.ONNX})
    device_kinds = {"OldNPU": "npu"}

    @classmethod
    def availability(cls, device=None):
        if device is not None and device != "OldNPU":
            return Availability(False, f"old-style-npu drives OldNPU only, not {device!r}")
        return Availability(True, "OldNPU present (ONNX Runtime on the CPU stands in)")

    def __init__(self, model, device, options):
        super().__init__(model, device, options)
        import onnxruntime

        try:
            self._session = onnxruntime.InferenceSession(str(model.path), providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise translate(type(self), exc, "load", model, device) from exc
        self._names = [i.name for i in self._session.get_inputs()]

    @property
    def info(self):
        return ExecutorInfo(self.runtime, "1.0", self.device, "f32")

    def run(self, inputs):
        session = self._session
        if session is None:
            raise ModelClosedError(f"{self.model.path.name} was closed", hint="load it again")
        try:
            return session.run(None, dict(zip(self._names, inputs)))
        except Exception as exc:
            raise translate(type(self), exc, "run", self.model, self.device) from exc

    def close(self):
        self.stop_workers()
        self._session = None
'''


def _old_style_class() -> type[Executor]:
    namespace: dict = {"__name__": "old_style_npu"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # said where it is the point of the test
        exec(compile(OLD_STYLE_PLUGIN, "old_style_npu.py", "exec"), namespace)
    return namespace["OldStyleNPU"]


def test_an_installed_old_style_plugin_is_ranked_loaded_and_warned_about(conv, tmp_path):
    from edgeaccel.testing.plugins import installed_plugins

    with pytest.warns(DeprecationWarning, match=r"OldStyleNPU declares its devices as `device_kinds"):
        with installed_plugins(tmp_path, distribution="old-style-npu", module="old_style_npu",
                               source=OLD_STYLE_PLUGIN,
                               entry_points={"old-style-npu": "old_style_npu:OldStyleNPU"}) as plugin:
            assert plugin.classes["old-style-npu"].device_kinds == {"OldNPU": "npu"}
            with edgeaccel.load(conv, executor="old-style-npu", selection=QUIET,
                                runtime=RuntimeOptions(cache=False)) as model:
                assert model.executor.name == "old-style-npu:OldNPU"
                with edgeaccel.load(conv, executor="onnxruntime", selection=QUIET,
                                    runtime=RuntimeOptions(cache=False)) as reference:
                    np.testing.assert_allclose(model.run(_input())[0], reference.run(_input())[0], rtol=1e-6)


class TestAnOldStylePluginPassesTheConformanceSuite(ExecutorConformance):
    """The whole executor contract, on a plug-in declaring its devices the older way: accepted, and the
    declared-facts test warns its author how to write it now."""

    executor_class = _old_style_class()
    device = "OldNPU"

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_model(cls, tmp_path_factory):
        from edgeaccel.formats import describe

        return describe(small_conv(tmp_path_factory.mktemp("conformance") / "conv.onnx"))

    def test_declared_facts_are_coherent(self, conformance_model):
        with pytest.warns(DeprecationWarning, match=r"declare device_specs = \(DeviceSpec\(name, kind\)"):
            super().test_declared_facts_are_coherent(conformance_model)


def test_schedule_takes_a_policy_object_as_load_did(conv):
    from edgeaccel.scheduling.policies import LatencyPolicy

    policy = LatencyPolicy()
    with edgeaccel.schedule(conv, policy, selection=QUIET, runtime=RuntimeOptions(cache=False)) as scheduled:
        assert scheduled.policy is policy
