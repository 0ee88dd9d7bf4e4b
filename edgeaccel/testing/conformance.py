"""The tests every executor passes, built-in or plug-in, in the spirit of keyring's ``BackendBasicTests``.

An executor's author subclasses ``ExecutorConformance`` in a pytest module and says which class, model and
device to test; pytest collects the mixin's tests in the subclass::

    from edgeaccel.testing.conformance import ExecutorConformance
    from hailo_edgeaccel import HailoExecutor

    class TestHailoExecutor(ExecutorConformance):
        executor_class = HailoExecutor
        model_path = "tests/models/mobilenet_v2.onnx"
        device = "Hailo8"

What the contract asks (``edgeaccel.executors.base``), one test each:
- ``availability()`` answers (an ``Availability`` with a reason) and never raises: for no device, every
  device the class declares, and device strings that mean nothing;
- the class's facts are coherent: runtime and formats set, its devices declared once as ``device_specs`` (a
  class still setting the older ``targets``, ``device_kinds`` or ``devices`` passes, with a DeprecationWarning
  that says how to write it), every device of a known kind, ``survey()`` returns a
  ``RuntimeSurvey`` and never raises, ``rejects()`` accepts the model it is tested on, the registry would
  register it;
- ``info`` tells the truth: its runtime and device are the executor's, its precision and version are named;
- outputs match the declared specs: as many as declared, each an ndarray of the declared dtype and static shape;
- ``run`` is safe from many threads: 8 threads x 50 calls give the single-thread answers;
- only edgeaccel errors escape: garbage handed straight to ``run`` (wrong dtype, wrong shape, objects) raises an
  ``EdgeAccelError``, a wrong count of inputs raises nothing else, and the executor still answers afterwards;
- ``close`` is idempotent, and ``run`` after it raises an ``EdgeAccelError``;
- ``submit`` gives the answer ``run`` gives.

Override ``make_executor`` for a constructor other than ``cls(model, device, options)``, or the
``conformance_model`` fixture (class-scoped, a classmethod) for a model made by the test (a SavedModel
exported in a temporary folder).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pytest

from ..errors import EdgeAccelError
from ..executors.base import Availability, Executor, ExecutorOptions
from ..executors.device import same_base
from ..executors.facts import DEVICE_KINDS, DeviceSpec, RuntimeSurvey
from ..executors.translate import ErrorRule
from ..modelinfo import Format, ModelInfo, TensorSpec
from ..tensors import random_array

# device strings no executor declares: availability() must say no (or yes) with a reason, never raise
NONSENSE_DEVICES = ("NoSuchDevice", "CUDA:x", "EdgeTPU:usb:first", "", "  ", "GPU.1.2", "💥")


class ExecutorConformance:
    """Mixin of the executor contract's tests. Set the class attributes below in a ``Test...`` subclass."""

    executor_class: ClassVar[type[Executor]]
    model_path: ClassVar[str | os.PathLike | None] = None  # the model to load (or override conformance_model)
    device: ClassVar[str] = "CPU"
    options: ClassVar[ExecutorOptions] = ExecutorOptions()
    runtime_name: ClassVar[str | None] = None  # what info.runtime says; the class's runtime when None
    threads: ClassVar[int] = 8
    calls_per_thread: ClassVar[int] = 50
    distinct_inputs: ClassVar[int] = 4  # threads cycle through these, so that a crossed answer shows
    seed: ClassVar[int] = 0

    # -- hooks a subclass may override -----------------------------------------------------------------------
    def make_executor(self, model: ModelInfo) -> Executor:
        return self.executor_class(model, self.device, self.options)

    def make_inputs(self, executor: Executor, count: int) -> list[list[np.ndarray]]:
        """Seeded random inputs over each input's useful range; dynamic dimensions become 1."""
        rng = np.random.default_rng(self.seed)
        return [[random_array(spec, rng) for spec in executor.inputs] for _ in range(count)]

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_model(cls) -> ModelInfo:
        from ..formats import describe

        if cls.model_path is None:
            pytest.fail(f"{cls.__name__} sets no model_path (or overrides the conformance_model fixture)")
        return describe(cls.model_path)

    @pytest.fixture(scope="class")
    @classmethod
    def executor(cls, conformance_model: ModelInfo):
        executor = cls.make_executor(cls(), conformance_model)
        yield executor
        executor.close()

    @pytest.fixture(scope="class")
    @classmethod
    def answers(cls, executor: Executor) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
        """(inputs, single-thread outputs) for ``distinct_inputs`` inputs."""
        inputs = cls.make_inputs(cls(), executor, cls.distinct_inputs)
        return inputs, [list(executor.run(x)) for x in inputs]

    # -- the contract ----------------------------------------------------------------------------------------
    def test_availability_never_raises(self):
        cls = self.executor_class
        declared = [t.name for t in cls.targets] + list(cls.device_kinds)
        for device in [None, *dict.fromkeys(declared), self.device, *NONSENSE_DEVICES]:
            try:
                answer = cls.availability(device)
            except Exception as exc:  # the contract: a reason, never an exception
                pytest.fail(f"{cls.__name__}.availability({device!r}) raised {type(exc).__name__}: {exc}")
            assert isinstance(answer, Availability), f"availability({device!r}) returned {answer!r}"
            assert isinstance(answer.reason, str) and answer.reason.strip(), \
                f"availability({device!r}) gives no reason: {answer!r}"
            assert str(answer)
        assert cls.availability(self.device), f"the device under test is not available: " \
                                              f"{cls.availability(self.device)}"

    def test_declared_facts_are_coherent(self, conformance_model: ModelInfo):
        from ..executors.registry import check_plugin

        cls = self.executor_class
        check_plugin(cls, f"{cls.__module__}:{cls.__qualname__}")  # what the registry asks of a plug-in
        assert isinstance(cls.runtime, str) and cls.runtime.strip()
        assert cls.formats and all(isinstance(f, Format) for f in cls.formats)
        assert cls.device_specs and all(isinstance(s, DeviceSpec) for s in cls.device_specs), \
            "device_specs is a tuple of edgeaccel.executors.DeviceSpec"
        if cls.devices_declared_as != "device_specs":  # accepted for one release; the author is told how
            warnings.warn(f"{cls.__name__} declares its devices with `{cls.devices_declared_as}`, which is "
                          f"deprecated: declare device_specs = (DeviceSpec(name, kind), ...) instead "
                          f"(docs/plugins.md)", DeprecationWarning, stacklevel=1)
        assert cls.device_kinds, "an executor drives at least one device"
        for name, kind in cls.device_kinds.items():
            assert kind in DEVICE_KINDS, f"device {name!r} has kind {kind!r}; kinds are {DEVICE_KINDS}"
        assert tuple(cls.device_kinds) == cls.devices
        assert {t.name for t in cls.targets if not t.planned} == set(cls.device_kinds)
        assert cls.presence in ("probe", "availability")
        assert all(isinstance(rule, ErrorRule) for rule in cls.error_rules)
        assert cls.target(self.device) is not None, f"{self.device!r} is none of {list(cls.device_kinds)}"
        try:
            survey = cls.survey()
        except Exception as exc:
            pytest.fail(f"{cls.__name__}.survey() raised {type(exc).__name__}: {exc}")
        assert isinstance(survey, RuntimeSurvey), f"survey() returned {survey!r}"
        assert survey.reason.strip()
        assert survey.name == cls.runtime
        why = cls.rejects(conformance_model, self.device, self.options)
        assert why is None, f"{cls.__name__}.rejects() refuses the model under test: {why}"

    def test_info_tells_the_truth(self, executor: Executor):
        info = executor.info
        assert info.runtime == (self.runtime_name or self.executor_class.runtime)
        assert same_base(info.device, self.device), f"info.device {info.device!r}, loaded on {self.device!r}"
        assert isinstance(info.precision, str) and info.precision.strip()
        if self.options.precision:
            assert self.options.precision in info.precision, \
                f"asked for {self.options.precision}, info says {info.precision!r}"
        assert isinstance(info.version, str) and info.version.strip() not in ("", "?"), \
            f"info.version is {info.version!r}"
        assert info.threads is None or (isinstance(info.threads, int) and info.threads > 0)
        assert isinstance(info.details, dict)
        assert info.name == f"{info.runtime}:{info.device}" and str(info)

    def test_outputs_match_declared_specs(self, executor: Executor, answers):
        specs = executor.outputs
        assert specs, "an executor declares its outputs"
        for outputs in answers[1]:
            assert len(outputs) == len(specs), f"{len(outputs)} outputs, {len(specs)} declared"
            for array, spec in zip(outputs, specs, strict=True):
                _check_output(array, spec)

    def test_run_is_safe_from_many_threads(self, executor: Executor, answers):
        inputs, expected = answers
        wrong: list[str] = []
        errors: list[BaseException] = []
        start = threading.Barrier(self.threads)

        def work(t: int) -> None:
            try:
                start.wait()
                for i in range(self.calls_per_thread):
                    k = (t + i) % len(inputs)
                    got = executor.run(inputs[k])
                    if not _same(got, expected[k]):
                        wrong.append(f"thread {t} call {i}: input {k} gave another answer")
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(self.threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert not errors, f"{len(errors)} threads raised, the first: {errors[0]!r}"
        assert not wrong, f"{len(wrong)} of {self.threads * self.calls_per_thread} answers differ: {wrong[:3]}"

    def test_submit_gives_the_answer_run_gives(self, executor: Executor, answers):
        inputs, expected = answers
        futures = [executor.submit(x) for x in inputs]
        for future, want in zip(futures, expected, strict=True):
            assert _same(future.result(timeout=120), want)

    @pytest.mark.parametrize("garbage", ["wrong dtype", "wrong shape", "objects", "too few inputs",
                                         "too many inputs"])
    def test_only_edgeaccel_errors_escape(self, executor: Executor, answers, garbage: str):
        """Garbage that no runtime can take is refused with an edgeaccel error. A wrong count of inputs is
        the Model's to refuse (``run`` gets validated inputs), so there only a raw exception is a failure."""
        inputs, expected = answers
        bad = _garbage(garbage, executor.inputs, inputs[0])
        if bad is None:
            pytest.skip(f"no {garbage} input can be made for {[str(s) for s in executor.inputs]}")
        try:
            executor.run(bad)
        except EdgeAccelError as exc:
            assert str(exc).strip()
        except Exception as exc:
            pytest.fail(f"{garbage}: run raised {type(exc).__module__}.{type(exc).__name__} (not an edgeaccel "
                        f"error): {exc}")
        else:
            if garbage not in ("too few inputs", "too many inputs"):
                pytest.fail(f"{garbage}: run answered instead of raising an edgeaccel error")
        assert _same(executor.run(inputs[0]), expected[0]), "a refused run left the executor answering otherwise"

    def test_close_is_idempotent_and_run_after_close_raises(self, conformance_model: ModelInfo):
        executor = self.make_executor(conformance_model)
        x = self.make_inputs(executor, 1)[0]
        executor.run(x)
        executor.close()
        executor.close()
        with pytest.raises(EdgeAccelError):
            executor.run(x)
        executor.close()


def _check_output(array, spec: TensorSpec) -> None:
    assert isinstance(array, np.ndarray), f"output {spec.name!r} is a {type(array).__name__}, not an ndarray"
    assert array.dtype == spec.dtype, f"output {spec.name!r} is {array.dtype}, declared {spec.dtype}"
    if spec.unranked:
        return
    assert array.ndim == len(spec.shape), f"output {spec.name!r} has shape {array.shape}, declared {spec.shape}"
    for got, want in zip(array.shape, spec.shape, strict=True):
        assert want is None or got == want, f"output {spec.name!r} has shape {array.shape}, declared {spec.shape}"


def _same(got: Sequence, want: Sequence) -> bool:
    return len(got) == len(want) and all(np.array_equal(np.asarray(a), np.asarray(b))
                                         for a, b in zip(got, want, strict=True))


def _garbage(kind: str, specs: Sequence[TensorSpec], good: list[np.ndarray]) -> list | None:
    if kind == "wrong dtype":  # another kind of number: floats for integer inputs, integers for float inputs
        return [a.astype(np.int64 if a.dtype.kind == "f" else np.float64) for a in good]
    if kind == "wrong shape":  # the last static dimension of the first input that has one, one larger
        for i, spec in enumerate(specs):
            static = [axis for axis, d in enumerate(spec.shape) if d is not None] if not spec.unranked else []
            if static:
                shape = list(good[i].shape)
                shape[static[-1]] += 1
                return [*good[:i], np.zeros(shape, good[i].dtype), *good[i + 1:]]
        return None
    if kind == "too few inputs":
        return list(good[:-1])
    if kind == "too many inputs":
        return [*good, good[-1]]
    if kind == "objects":
        return [np.array([object(), "text"], dtype=object) for _ in good]
    raise ValueError(kind)
