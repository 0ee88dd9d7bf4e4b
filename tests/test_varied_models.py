"""Models unlike the shared ones (the held-back set will be): float and int8/int16 TFLite with dynamic batch,
several inputs and outputs, control flow, int64/bool I/O; ONNX with dynamic spatial size. Each must give the
raw runtime's outputs through edgeaccel.load, at batch 1 and 2."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from onnx_models import small_conv

tf = pytest.importorskip("tensorflow", reason="the tensorflow extra builds these models (it is in dev)")


@pytest.fixture(scope="module")
def tflite_models(tmp_path_factory):
    out = tmp_path_factory.mktemp("varied")
    keras = tf.keras
    keras.utils.set_random_seed(1)
    a, b = keras.Input((8,), name="a"), keras.Input((4, 4, 1), name="b")
    x = keras.layers.Dense(5)(a)
    y = keras.layers.Flatten()(keras.layers.Conv2D(3, 2)(b))
    model = keras.Model([a, b], [keras.layers.Softmax(name="p")(x), keras.layers.Dense(2, name="q")(y)])

    def representative():
        rng = np.random.default_rng(0)
        for _ in range(20):
            yield {"a": rng.random((1, 8), np.float32), "b": rng.random((1, 4, 4, 1), np.float32)}

    def convert(name, **settings):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        for key, value in settings.items():
            setattr(conv, key, value)
        (out / name).write_bytes(conv.convert())

    convert("float_multi_dynamic.tflite")
    convert("dynamic_range.tflite", optimizations=[tf.lite.Optimize.DEFAULT])
    int8 = dict(optimizations=[tf.lite.Optimize.DEFAULT], representative_dataset=representative)
    convert("int8_io.tflite", inference_input_type=tf.int8, inference_output_type=tf.int8, **int8)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations, conv.representative_dataset = [tf.lite.Optimize.DEFAULT], representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    (out / "int16x8.tflite").write_bytes(conv.convert())

    @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32)])
    def loop(v):
        return tf.while_loop(lambda i, v: i < 5, lambda i, v: (i + 1, v * 1.5 + 1.0), [tf.constant(0), v])[1]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.bool)])
    def select(values, mask):
        return tf.where(mask, values * 2, values), tf.reduce_sum(tf.cast(mask, tf.int32))

    for name, fn in (("while_loop.tflite", loop), ("int64_bool.tflite", select)):
        conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
        (out / name).write_bytes(conv.convert())
    return sorted(out.glob("*.tflite"))


def _inputs(details, batch, rng):
    arrays = []
    for d in details:
        shape = [batch if s == -1 else s for s in d["shape_signature"]]
        dtype = d["dtype"]
        if dtype == np.bool_:
            arrays.append(rng.integers(0, 2, shape).astype(bool))
        elif np.issubdtype(dtype, np.integer):
            arrays.append(rng.integers(-100, 100, shape).astype(dtype))
        else:
            arrays.append(rng.random(shape).astype(dtype))
    return arrays


@pytest.mark.slow
def test_tflite_models_equal_raw_litert(tflite_models):
    from ai_edge_litert.interpreter import Interpreter

    rng = np.random.default_rng(0)
    for path in tflite_models:
        raw = Interpreter(model_path=str(path))
        details = raw.get_input_details()
        with edgeaccel.load(path) as model:
            assert model.executor.runtime == "litert"
            for batch in (1, 2):
                arrays = _inputs(details, batch, rng)
                for d, a in zip(details, arrays, strict=True):
                    raw.resize_tensor_input(d["index"], a.shape)
                raw.allocate_tensors()
                for d, a in zip(details, arrays, strict=True):
                    raw.set_tensor(d["index"], a)
                raw.invoke()
                expected = [raw.get_tensor(d["index"]) for d in raw.get_output_details()]
                got = model.run({s.name: a for s, a in zip(model.inputs, arrays, strict=True)})
                for g, e in zip(got, expected, strict=True):
                    np.testing.assert_array_equal(g, e, err_msg=f"{path.name} batch {batch}")
            assert model.fallbacks == (), path.name


@pytest.mark.parametrize("executor", ["onnxruntime", "openvino"])
def test_onnx_with_dynamic_spatial_size(tmp_path, executor):
    import onnxruntime as ort

    path = small_conv(tmp_path / "dyn.onnx", dynamic=True)
    raw = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    with edgeaccel.load(path, executor=executor) as model:
        assert model.inputs[0].shape == (1, 3, None, None)
        for hw in ((16, 16), (9, 23)):
            x = rng.random((1, 3, *hw), np.float32)
            np.testing.assert_allclose(model.run(x)[0], raw.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
