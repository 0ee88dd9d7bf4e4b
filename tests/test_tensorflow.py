"""The TensorFlow executor on a SavedModel the test exports from Keras: the same answers as TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel

tf = pytest.importorskip("tensorflow", reason="the tensorflow extra is not installed (it is in dev)")


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    keras = tf.keras
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,), name="features"), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    folder = tmp_path_factory.mktemp("sm") / "classifier"
    model.export(str(folder))  # a SavedModel with a serving_default signature
    return folder, model


def test_savedmodel_runs_with_the_tensorflow_answers(saved_model):
    folder, keras_model = saved_model
    x = np.random.default_rng(0).random((4, 6), dtype=np.float32)
    with edgeaccel.load(folder) as model:
        assert model.executor.runtime == "tensorflow" and model.info.format.value == "savedmodel"
        (spec,) = model.inputs
        assert spec.shape == (None, 6) and spec.dtype == np.float32
        out = model.run(x)[0]
    np.testing.assert_allclose(out, keras_model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_savedmodel_input_errors_precede_tensorflow(saved_model):
    folder, _ = saved_model
    with edgeaccel.load(folder) as model:
        with pytest.raises(edgeaccel.InputError):
            model.run(np.zeros((1, 5), np.float32))
        with pytest.raises(edgeaccel.InputError):
            model.run(np.zeros((1, 6), np.float64))


def test_a_missing_signature_is_a_clear_error(saved_model):
    folder, _ = saved_model
    with pytest.raises(edgeaccel.ModelLoadError, match="signature 'nope'"):
        edgeaccel.load(folder, runtime_options={"signature": "nope"}, strict=True)


def test_tpu_and_gpu_say_why_they_cannot_run_here():
    from edgeaccel.executors.tensorflow import TensorFlowExecutor

    for device in ("TPU", "GPU"):
        available = TensorFlowExecutor.availability(device)
        assert not available and available.reason and available.fix


@pytest.mark.slow
def test_savedmodel_runs_isolated_under_the_sandbox(saved_model):
    """TensorFlow in a sandboxed worker: the filter's pid rules, dropped capabilities and minimal environment leave
    it the same answers (it starts its thread pools and sets their affinity on itself). Through the raw executor:
    an isolated SavedModel's Model lists no inputs (its signature is read by TensorFlow in the worker only), a
    separate defect."""
    from edgeaccel import IsolationLimits
    from edgeaccel.isolation.sandbox import landlock_abi

    folder, keras_model = saved_model
    x = np.random.default_rng(1).random((2, 6), dtype=np.float32)
    limits = IsolationLimits(sandbox="require" if landlock_abi() >= 6 else "auto")
    with edgeaccel.load(folder, executor="tensorflow", strict=True, isolate=limits) as model:
        assert "seccomp" in model.executor.details["isolated"]["sandbox"]["active"]
        out = model._executor.run([x])[0]
    np.testing.assert_allclose(out, keras_model(x).numpy(), rtol=1e-5, atol=1e-6)
