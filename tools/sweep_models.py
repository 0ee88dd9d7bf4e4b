"""Sweep: build a broad set of models unlike the shared ones, then check that each loads and runs through
edgeaccel.load with the raw runtime's outputs (or fails clearly where the raw runtime fails too).

    python tools/sweep_models.py --out /tmp/sweep            # build (if missing) and check every model
    python tools/sweep_models.py --out /tmp/sweep --rebuild  # build again
    python tools/sweep_models.py --out /tmp/sweep --only onnx_   # check the models whose path has 'onnx_'

For every model, in a child process (a runtime crash is reported, not fatal), it compares
``edgeaccel.load(path)`` (the default choice, loaded twice: the second load reads edgeaccel's caches; and once
isolated) and ``edgeaccel.load(path, executor=X)`` for each executor that reads the format, against the raw
runtime called directly: LiteRT's Interpreter, ONNX Runtime's InferenceSession (CPU), OpenVINO's
compile_model at INFERENCE_PRECISION_HINT f32. LiteRT and ONNX Runtime must be equal to the bit; OpenVINO is
compared within a tolerance. Dynamic dimensions are run at two sizes. One line per model and executor:

    OK            outputs equal (or within tolerance for OpenVINO)
    OK-REFUSED    both edgeaccel and the raw runtime fail, edgeaccel with an EdgeAccelError that says why
    MISMATCH      outputs differ (max abs diff), or names/shapes/dtypes differ
    FALSE-REJECT  edgeaccel raises where the raw runtime runs
    UNCLEAR-ERROR both fail, but edgeaccel's error is not an EdgeAccelError or says nothing
    CRASH         the child process died or hung
    NO-RAW        edgeaccel loads the model but the raw runtime does not

``--only TEXT`` checks the models whose path below --out contains TEXT. Models are found by content (the names
of some copies say nothing); a file NAME.meta.json beside a model gives input hints (integer ranges, sizes for
dynamic dimensions).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BUILD_STEPS = ("tflite", "onnx", "tf2onnx", "ir", "tflite_extra", "tflite_edges", "onnx_extra", "ir_extra", "renamed")


# ---------------------------------------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------------------------------------


def _save_onnx(out: Path, name, nodes, inputs, outputs, inits, opsets, ir, functions=(), check=True, **meta) -> Path:
    """Write one hand-built ONNX model. inits: TensorProtos, or (name, array) pairs; opsets: (domain, version)."""
    import onnx
    from onnx import helper, numpy_helper

    inits = [i if isinstance(i, onnx.TensorProto) else numpy_helper.from_array(np.asarray(i[1]), i[0]) for i in inits]
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=ir,
                              functions=list(functions))
    if check:  # some valid-for-ORT models fail the checker (a graph input without a shape): kept on purpose
        onnx.checker.check_model(model, full_check=True)
    onnx.save(model, out / f"{name}.onnx")
    if meta:
        _meta(out / f"{name}.onnx", **meta)
    print("built", name, flush=True)
    return out / f"{name}.onnx"


def _conv_calibration():
    """ONNX Runtime's static quantization reader: 8 seeded [1, 3, 16, 16] inputs named x."""
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            r = np.random.default_rng(3)
            self.items = iter([{"x": r.random((1, 3, 16, 16), np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.items, None)

    return Reader()

def _meta(path: Path, **meta) -> None:
    """Input hints for the checker: int ranges by input position, shapes to try for dynamic inputs."""
    path.with_name(path.name + ".meta.json").write_text(json.dumps(meta))


class _section:
    """Build steps go on after one model fails to build (a converter limit is not an edgeaccel finding)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is not None and isinstance(exc, Exception):
            print(f"skip {self.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                  flush=True)
        return exc is None or isinstance(exc, Exception)


def build_tflite(out: Path) -> None:
    import tensorflow as tf

    keras = tf.keras
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)

    def save(name, data, **meta):
        (out / name).write_bytes(data)
        if meta:
            _meta(out / name, **meta)
        print("built", name, flush=True)

    def from_keras(model, **settings):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        for key, value in settings.items():
            if key == "supported_ops":
                conv.target_spec.supported_ops = value
            elif key == "supported_types":
                conv.target_spec.supported_types = value
            else:
                setattr(conv, key, value)
        return conv.convert()

    def from_fn(fn, **settings):
        conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
        for key, value in settings.items():
            if key == "supported_ops":
                conv.target_spec.supported_ops = value
            else:
                setattr(conv, key, value)
        return conv.convert()

    def rep_for(model, n=16, int_high=None):
        shapes = [(i.shape, i.dtype) for i in model.inputs]

        def gen():
            r = np.random.default_rng(1)
            for _ in range(n):
                sample = []
                for shape, dtype in shapes:
                    shape = [1 if d is None else d for d in shape]
                    if "int" in str(dtype):
                        sample.append(r.integers(0, int_high or 10, shape).astype(np.int32))
                    else:
                        sample.append(r.random(shape, np.float32) * 2 - 1)
                yield sample
        return gen

    def quant_variants(prefix, model, int_high=None, kinds=("dynrange", "int8_float_io", "int8_uint8io",
                                                              "int8_int8io", "int16x8", "fp16")):
        rep = rep_for(model, int_high=int_high)
        opt = [tf.lite.Optimize.DEFAULT]
        variants = {
            "float": {},
            "dynrange": {"optimizations": opt},
            "fp16": {"optimizations": opt, "supported_types": [tf.float16]},
            "int8_float_io": {"optimizations": opt, "representative_dataset": rep},
            "int8_uint8io": {"optimizations": opt, "representative_dataset": rep,
                             "supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS_INT8],
                             "inference_input_type": tf.uint8, "inference_output_type": tf.uint8},
            "int8_int8io": {"optimizations": opt, "representative_dataset": rep,
                            "supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS_INT8],
                            "inference_input_type": tf.int8, "inference_output_type": tf.int8},
            "int16x8": {"optimizations": opt, "representative_dataset": rep,
                        "supported_ops": [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]},
        }
        for kind in ("float", *kinds):
            try:
                data = from_keras(model, **variants[kind])
            except Exception as exc:  # a converter limit is not an edgeaccel finding
                print(f"skip {prefix}_{kind}: converter failed: {str(exc).splitlines()[0][:200]}", flush=True)
                continue
            meta = {"int_high": [int_high]} if int_high else {}
            save(f"{prefix}_{kind}.tflite", data, **meta)

    L = keras.layers
    with _section("# conv stack: Conv2D + BatchNorm + ReLU + pool + dense"):
        # conv stack: Conv2D + BatchNorm + ReLU + pool + dense
        x = keras.Input((16, 16, 3))
        h = L.Conv2D(8, 3, padding="same")(x)
        h = L.BatchNormalization()(h)
        h = L.ReLU()(h)
        h = L.MaxPooling2D()(h)
        h = L.DepthwiseConv2D(3, padding="same")(h)
        h = L.Conv2DTranspose(4, 3, strides=2, padding="same")(h)
        h = L.GlobalAveragePooling2D()(h)
        conv = keras.Model(x, L.Dense(5, activation="softmax")(h))
        quant_variants("tfl_conv2d", conv)

    with _section("x = keras.Input((20, 4))"):
        x = keras.Input((20, 4))
        h = L.Conv1D(6, 3, activation="relu")(x)
        h = L.AveragePooling1D(2)(h)
        quant_variants("tfl_conv1d", keras.Model(x, L.Flatten()(h)), kinds=("int8_int8io",))

    with _section("x = keras.Input((6, 8, 8, 2))"):
        x = keras.Input((6, 8, 8, 2))
        h = L.Conv3D(4, 3, activation="relu")(x)  # no MaxPooling3D: the converter has no TFLite op for it
        quant_variants("tfl_conv3d", keras.Model(x, L.Flatten()(h)), kinds=("dynrange",))

    with _section("for rnn_name, layer in (('lstm', lambda: L.LSTM(8)), ('gru',"):
        for rnn_name, layer in (("lstm", lambda: L.LSTM(8)), ("gru", lambda: L.GRU(8)),
                                ("bilstm", lambda: L.Bidirectional(L.LSTM(6, return_sequences=True))),
                                ("simplernn", lambda: L.SimpleRNN(5))):
            x = keras.Input((7, 3), batch_size=1)
            quant_variants(f"tfl_{rnn_name}", keras.Model(x, layer()(x)),
                           kinds=("dynrange",))  # int8 LSTM: the converter itself dies with SIGSEGV

    with _section("x = keras.Input((6, 16))"):
        x = keras.Input((6, 16))
        h = L.MultiHeadAttention(num_heads=2, key_dim=8)(x, x)
        h = L.LayerNormalization()(h + x)
        h = L.Dense(16, activation="gelu")(h)
        quant_variants("tfl_mha", keras.Model(x, h), kinds=("dynrange", "int8_float_io", "int16x8"))

    with _section("ids = keras.Input((5,), dtype='int32')"):
        ids = keras.Input((5,), dtype="int32")
        h = L.Embedding(50, 8)(ids)
        h = L.GlobalAveragePooling1D()(h)
        quant_variants("tfl_embedding", keras.Model(ids, L.Dense(3)(h)), int_high=50, kinds=("dynrange",))

    with _section("# keras applications, small inputs, no weights download"):
        # keras applications, small inputs, no weights download
        for app_name, ctor, size in (("mobilenetv3small", keras.applications.MobileNetV3Small, 64),
                                     ("efficientnetb0", keras.applications.EfficientNetB0, 64)):
            model = ctor(weights=None, input_shape=(size, size, 3), classes=10)
            quant_variants(f"tfl_{app_name}", model, kinds=("int8_uint8io",))

    with _section("# dynamic batch (Keras keeps the batch None) at float and in"):
        # dynamic batch (Keras keeps the batch None) at float and int8
        x = keras.Input((10,))
        dyn = keras.Model(x, L.Dense(4, activation="tanh")(L.Dense(12, activation="relu")(x)))
        save("tfl_dynbatch_float.tflite", from_keras(dyn), dyn={"0": [[1, 10], [3, 10]]})
        save("tfl_dynbatch_int8.tflite", from_keras(dyn, optimizations=[tf.lite.Optimize.DEFAULT],
                                                    representative_dataset=rep_for(dyn),
                                                    inference_input_type=tf.int8, inference_output_type=tf.int8),
             dyn={"0": [[1, 10], [3, 10]]})

    with _section("@tf.function(input_signature=[tf.TensorSpec([None, None, Non"):
        @tf.function(input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32)])
        def dyn_spatial(img):
            k = tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
            y = tf.nn.relu(tf.nn.conv2d(img, k, 1, "SAME"))
            return tf.reduce_mean(y, axis=[1, 2]), tf.image.resize(y, [8, 8])

        save("tfl_dynspatial.tflite", from_fn(dyn_spatial), dyn={"0": [[1, 9, 13, 3], [3, 16, 16, 3]]})

    with _section("@tf.function(input_signature=[tf.TensorSpec([2, 12], tf.floa"):
        @tf.function(input_signature=[tf.TensorSpec([2, 12], tf.float32), tf.TensorSpec([4], tf.int32)])
        def gathers(v, idx):
            g = tf.gather(v, idx, axis=1)
            s = v[:, 1:10:2]
            top_v, top_i = tf.math.top_k(v, k=3)
            return g, s, top_v, top_i, tf.argmax(v, axis=1), tf.cumsum(v, axis=1), tf.gather_nd(v, [[0, 1], [1, 3]])

        save("tfl_gather_ops.tflite", from_fn(gathers), int_high={"idx": 12})

    with _section("@tf.function(input_signature=[tf.TensorSpec([1, 6, 6, 4], tf"):
        @tf.function(input_signature=[tf.TensorSpec([1, 6, 6, 4], tf.float32)])
        def shapes(img):
            a = tf.image.resize(img, [12, 9], method="bilinear")
            b = tf.image.resize(img, [3, 3], method="nearest")
            p = tf.pad(img, [[0, 0], [1, 2], [0, 1], [0, 0]], mode="REFLECT")
            q = tf.pad(img, [[0, 0], [1, 1], [1, 1], [0, 0]], constant_values=0.5)
            c = tf.concat([img, img * 2.0], axis=3)
            s1, s2 = tf.split(c, [3, 5], axis=3)
            u = tf.unstack(img, axis=3)
            t = tf.transpose(img, [0, 3, 1, 2])
            return a, b, p, q, s1, s2, u[0], u[3], t, tf.tile(img, [1, 2, 1, 1]), tf.reverse(img, [2])

        save("tfl_resize_pad_split.tflite", from_fn(shapes))

    with _section("@tf.function(input_signature=[tf.TensorSpec([3, 4, 5], tf.fl"):
        @tf.function(input_signature=[tf.TensorSpec([3, 4, 5], tf.float32)])
        def reductions(v):
            return (tf.reduce_max(v, 1), tf.reduce_min(v, [0, 2]), tf.reduce_prod(v, 2), tf.reduce_mean(v),
                    tf.reduce_sum(v, 0, keepdims=True), tf.reduce_any(v > 0.5, 1), tf.math.reduce_std(v, 2),
                    tf.nn.log_softmax(v), tf.math.l2_normalize(v, 2), tf.einsum("abc,adc->abd", v, v))

        save("tfl_reductions.tflite", from_fn(reductions))

    with _section("@tf.function(input_signature=[tf.TensorSpec([], tf.float32),"):
        @tf.function(input_signature=[tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.int32)])
        def scalars(a, n):
            return a * 2.0 + tf.cast(n, tf.float32), tf.range(n) * 2, tf.reduce_sum(tf.range(n))

        save("tfl_scalars.tflite", from_fn(scalars), int_high={"n": 7}, int_low={"n": 1})

    with _section("@tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float"):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32), tf.TensorSpec([], tf.bool)])
        def cond(v, flag):
            return tf.cond(flag, lambda: v * 3.0, lambda: v - 1.0)

        save("tfl_if_cond.tflite", from_fn(cond))

    with _section("@tf.function(input_signature=[tf.TensorSpec([2, 3, 4, 2, 3, "):
        @tf.function(input_signature=[tf.TensorSpec([2, 3, 4, 2, 3, 2], tf.float32)])
        def rank6(v):
            return tf.transpose(v, [5, 4, 3, 2, 1, 0]) + 1.0, tf.reshape(v, [6, 48])

        save("tfl_rank6.tflite", from_fn(rank6))

    with _section("@tf.function(input_signature=[tf.TensorSpec([1, 16], tf.floa"):
        @tf.function(input_signature=[tf.TensorSpec([1, 16], tf.float32)])
        def rfft(v):
            spec = tf.signal.rfft(v)
            return tf.abs(spec)

        try:
            save("tfl_rfft.tflite", from_fn(rfft))
        except Exception as exc:
            print("skip tfl_rfft:", str(exc).splitlines()[0][:200])

    with _section("@tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float"):
        @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32)])
        def passthrough(v):
            return v, v * 2.0, tf.constant([1.0, 2.0])

        save("tfl_passthrough_const.tflite", from_fn(passthrough))

    with _section("@tf.function(input_signature=[tf.TensorSpec([3, 3], tf.float"):
        @tf.function(input_signature=[tf.TensorSpec([3, 3], tf.float32)])
        def flex(v):
            return tf.linalg.det(v), tf.linalg.inv(v)  # MatrixDeterminant / MatrixInverse: TF ops only (Flex)

        save("tfl_flex_select_tf_ops.tflite", from_fn(flex, supported_ops=[tf.lite.OpsSet.TFLITE_BUILTINS,
                                                                             tf.lite.OpsSet.SELECT_TF_OPS]))

    with _section("@tf.function(input_signature=[tf.TensorSpec([3], tf.string),"):
        @tf.function(input_signature=[tf.TensorSpec([3], tf.string), tf.TensorSpec([2], tf.int32)])
        def strings(words, idx):
            return tf.gather(words, idx), tf.reshape(words, [3, 1])

        try:
            save("tfl_string_io.tflite", from_fn(strings), int_high={"idx": 3})
        except Exception as exc:
            print("skip tfl_string_io:", str(exc).splitlines()[0][:200])

    with _section("@tf.function(input_signature=[tf.TensorSpec([None, 4], tf.fl"):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32), tf.TensorSpec([None], tf.int64)])
        def mixed(v, n):
            return tf.cast(tf.reduce_sum(v, 1), tf.float16), n * 3, tf.cast(v > 0.5, tf.uint8)

        try:
            save("tfl_mixed_dtypes.tflite", from_fn(mixed), dyn={"v": [[1, 4], [3, 4]], "n": [[1], [3]]})
        except Exception as exc:
            print("skip tfl_mixed_dtypes:", str(exc).splitlines()[0][:200])

    with _section("# several signatures (from a SavedModel); LiteRT's Interpret"):
        # several signatures (from a SavedModel); LiteRT's Interpreter exposes the first
        class Two(tf.Module):
            def __init__(self):
                self.w = tf.Variable(rng.standard_normal((4, 3)).astype(np.float32))

            @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
            def encode(self, x):
                return {"code": tf.matmul(x, self.w)}

            @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32)])
            def decode(self, z):
                return {"recon": tf.matmul(z, self.w, transpose_b=True), "norm": tf.norm(z, axis=1)}

        two = Two()
        sm = out / "_two_signatures_savedmodel"
        tf.saved_model.save(two, str(sm), signatures={"encode": two.encode, "decode": two.decode})
        save("tfl_two_signatures.tflite", tf.lite.TFLiteConverter.from_saved_model(str(sm)).convert())

    # Keras model saved as SavedModel: source for OpenVINO and tf2onnx below
    tf.saved_model.save(conv, str(out / "_conv_savedmodel"))
    tf.saved_model.save(dyn, str(out / "_dyn_savedmodel"))


def build_onnx(out: Path) -> None:
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    T = helper.make_tensor_value_info

    def save(name, nodes, inputs, outputs, inits=None, opset=17, ir=9, extra_opsets=(), **kwargs):
        return _save_onnx(out, name, nodes, inputs, outputs, (inits or {}).items(), (("", opset), *extra_opsets),
                          ir, **kwargs)

    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731

    save("onnx_gather_op11", [helper.make_node("Gather", ["x", "i"], ["y"], axis=1),
                              helper.make_node("Gather", ["E", "i"], ["z"])],
         [T("x", TP.FLOAT, [2, 10]), T("i", TP.INT64, [3])],
         [T("y", TP.FLOAT, [2, 3]), T("z", TP.FLOAT, [3, 4])], {"E": f(10, 4)}, opset=11, int_high=[None, 10])
    save("onnx_einsum_op12", [helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")],
         [T("a", TP.FLOAT, ["B", 3, 4]), T("b", TP.FLOAT, ["B", 4, 5])], [T("y", TP.FLOAT, ["B", 3, 5])],
         opset=12, dyn={"0": [[1, 3, 4], [3, 3, 4]], "1": [[1, 4, 5], [3, 4, 5]]})
    save("onnx_layernorm_op17", [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
         [T("x", TP.FLOAT, ["batch", "seq", 8])], [T("y", TP.FLOAT, ["batch", "seq", 8])],
         {"g": f(8), "b": f(8)}, opset=17, dyn={"0": [[1, 5, 8], [3, 2, 8]]})
    save("onnx_resize_op13", [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear"),
                              helper.make_node("Resize", ["x", "", "", "sz"], ["z"], mode="nearest",
                                               nearest_mode="floor", coordinate_transformation_mode="asymmetric")],
         [T("x", TP.FLOAT, [1, 2, 5, 7])], [T("y", TP.FLOAT, [1, 2, 10, 14]), T("z", TP.FLOAT, [1, 2, 3, 4])],
         {"s": np.array([1, 1, 2, 2], np.float32), "sz": np.array([1, 2, 3, 4], np.int64)}, opset=13)
    save("onnx_resize_op19_antialias", [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear",
                                                         antialias=1)],
         [T("x", TP.FLOAT, [1, 1, 8, 8])], [T("y", TP.FLOAT, [1, 1, 4, 4])],
         {"s": np.array([1, 1, 0.5, 0.5], np.float32)}, opset=19, ir=9)

    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                               [T("t", TP.FLOAT, [2, 3])], [numpy_helper.from_array(np.float32(2.0), "two")])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [T("e", TP.FLOAT, [2, 3])])
    save("onnx_if_op13", [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
         [T("x", TP.FLOAT, [2, 3]), T("c", TP.BOOL, [])], [T("y", TP.FLOAT, [2, 3])], opset=13)

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("Cast", ["iter"], ["iter_f"], to=TP.FLOAT),
         helper.make_node("Mul", ["acc_out", "iter_f"], ["scan_out"])],
        "body", [T("iter", TP.INT64, []), T("cond_in", TP.BOOL, []), T("acc_in", TP.FLOAT, [3])],
        [T("cond_out", TP.BOOL, []), T("acc_out", TP.FLOAT, [3]), T("scan_out", TP.FLOAT, [3])])
    save("onnx_loop_op16", [helper.make_node("Loop", ["n", "", "a0"], ["acc", "scans"], body=body)],
         [T("x", TP.FLOAT, [3]), T("n", TP.INT64, []), T("a0", TP.FLOAT, [3])],
         [T("acc", TP.FLOAT, [3]), T("scans", TP.FLOAT, [None, 3])], opset=16, int_high=[None, 6, None],
         int_low=[None, 1, None])

    scan_body = helper.make_graph([helper.make_node("Add", ["s_in", "xi"], ["s_out"]),
                                   helper.make_node("Identity", ["s_out"], ["y_i"])], "scan_body",
                                  [T("s_in", TP.FLOAT, [2]), T("xi", TP.FLOAT, [2])],
                                  [T("s_out", TP.FLOAT, [2]), T("y_i", TP.FLOAT, [2])])
    save("onnx_scan_op11", [helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=scan_body, num_scan_inputs=1)],
         [T("s0", TP.FLOAT, [2]), T("xs", TP.FLOAT, ["steps", 2])],
         [T("s", TP.FLOAT, [2]), T("ys", TP.FLOAT, ["steps", 2])],
         opset=11, dyn={"1": [[1, 2], [5, 2]]})
    save("onnx_topk_nonzero_range", [
        helper.make_node("TopK", ["x", "k"], ["tv", "ti"], axis=-1, largest=1, sorted=1),
        helper.make_node("Greater", ["x", "half"], ["m"]),
        helper.make_node("NonZero", ["m"], ["nz"]),
        helper.make_node("Range", ["start", "lim", "delta"], ["r"]),
        helper.make_node("Expand", ["col", "shape"], ["ex"]),
        helper.make_node("CumSum", ["x", "ax"], ["cs"], reverse=1)],
        [T("x", TP.FLOAT, [2, 6]), T("lim", TP.INT64, []), T("shape", TP.INT64, [2])],
        [T("tv", TP.FLOAT, [2, 3]), T("ti", TP.INT64, [2, 3]), T("nz", TP.INT64, [2, None]),
         T("r", TP.INT64, [None]), T("ex", TP.FLOAT, [None, None]), T("cs", TP.FLOAT, [2, 6])],
        {"k": np.array([3], np.int64), "half": np.float32(0.5), "start": np.int64(1), "delta": np.int64(2),
         "col": f(3, 1), "ax": np.int64(1)}, opset=14, int_low=[None, 2, 1], int_high=[None, 9, 3],
        fixed={"2": [3, 4]})
    save("onnx_float16_io", [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
         [T("x", TP.FLOAT16, [2, 8])], [T("y", TP.FLOAT16, [2, 4])], {"W": f(8, 4).astype(np.float16)}, opset=17)
    save("onnx_bool_int64_io", [helper.make_node("Where", ["m", "a", "b"], ["y"]),
                                helper.make_node("Not", ["m"], ["nm"]),
                                helper.make_node("ReduceSum", ["a", "axes"], ["s"], keepdims=0)],
         [T("m", TP.BOOL, [4]), T("a", TP.INT64, [4]), T("b", TP.INT64, [4])],
         [T("y", TP.INT64, [4]), T("nm", TP.BOOL, [4]), T("s", TP.INT64, [])], {"axes": np.array([0], np.int64)},
         opset=13)
    save("onnx_uint8_double_io", [helper.make_node("Cast", ["u"], ["uf"], to=TP.DOUBLE),
                                  helper.make_node("Add", ["uf", "d"], ["y"]),
                                  helper.make_node("Cast", ["y"], ["yi"], to=TP.INT32)],
         [T("u", TP.UINT8, [3]), T("d", TP.DOUBLE, [3])], [T("y", TP.DOUBLE, [3]), T("yi", TP.INT32, [3])], opset=13)
    save("onnx_symbolic_multi_out", [helper.make_node("MatMul", ["x", "W"], ["h"]),
                                     helper.make_node("Softmax", ["h"], ["p"], axis=-1),
                                     helper.make_node("ArgMax", ["h"], ["a"], axis=-1, keepdims=0),
                                     helper.make_node("Shape", ["x"], ["sh"])],
         [T("x", TP.FLOAT, ["batch", "seq", 6])],
         [T("p", TP.FLOAT, ["batch", "seq", 4]), T("a", TP.INT64, ["batch", "seq"]), T("sh", TP.INT64, [3])],
         {"W": f(6, 4)}, opset=18, dyn={"0": [[1, 2, 6], [3, 7, 6]]})
    save("onnx_opset21_ir10", [helper.make_node("Relu", ["x"], ["g"]),
                               helper.make_node("ReduceMean", ["g", "axes"], ["y"], keepdims=1)],
         [T("x", TP.FLOAT, [1, 4, 4])], [T("y", TP.FLOAT, [1, 1, 4])], {"axes": np.array([1], np.int64)},
         opset=21, ir=10)
    save("onnx_gelu_op20", [helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")],
         [T("x", TP.FLOAT, [2, 5])], [T("y", TP.FLOAT, [2, 5])], opset=20, ir=9)
    # no shape at all on the input (rank unknown), and an unknown (unnamed) dimension on another
    save("onnx_unknown_shapes", [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Abs", ["z"], ["w"])],
         [helper.make_tensor_value_info("x", TP.FLOAT, None), T("z", TP.FLOAT, [None, 3])],
         [helper.make_tensor_value_info("y", TP.FLOAT, None), T("w", TP.FLOAT, [None, 3])], opset=17,
         check=False, dyn={"0": [[2, 3, 4], [5]], "1": [[2, 3], [1, 3]]})
    # only the output's shape is unknown (shape inference would give it; exporters leave it out)
    save("onnx_unranked_output", [helper.make_node("Relu", ["x"], ["y"])], [T("x", TP.FLOAT, [2, 3])],
         [helper.make_tensor_value_info("y", TP.FLOAT, None)], opset=17, check=False)
    # input passed straight through as an output, and an output that is an initializer
    save("onnx_passthrough", [helper.make_node("Identity", ["x"], ["x_copy"])],
         [T("x", TP.FLOAT, [2, 2])], [T("x", TP.FLOAT, [2, 2]), T("x_copy", TP.FLOAT, [2, 2]), T("C", TP.FLOAT, [2])],
         {"C": f(2)}, opset=17)
    # an initializer also listed as a graph input (old exporters: an overridable default)
    g = helper.make_graph([helper.make_node("Add", ["x", "bias"], ["y"])], "init_as_input",
                          [T("x", TP.FLOAT, [1, 3]), T("bias", TP.FLOAT, [3])], [T("y", TP.FLOAT, [1, 3])],
                          [numpy_helper.from_array(f(3), "bias")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)], ir_version=6)
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, out / "onnx_initializer_as_input_ir6.onnx")
    # a model-local function
    fn = helper.make_function("custom.fn", "Scale2", ["a"], ["b"],
                              [helper.make_node("Constant", [], ["two"],
                                                value=numpy_helper.from_array(np.float32(2.0))),
                               helper.make_node("Mul", ["a", "two"], ["b"])],
                              [helper.make_opsetid("", 17)])
    save("onnx_local_function", [helper.make_node("Scale2", ["x"], ["y"], domain="custom.fn")],
         [T("x", TP.FLOAT, [3])], [T("y", TP.FLOAT, [3])], opset=17,
         extra_opsets=[("custom.fn", 1)], functions=[fn])
    # com.microsoft contrib ops
    save("onnx_contrib_ms", [helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft", alpha=0.5,
                                              transB=1),
                             helper.make_node("Gelu", ["y"], ["g"], domain="com.microsoft")],
         [T("a", TP.FLOAT, [2, 4]), T("b", TP.FLOAT, [3, 4])], [T("g", TP.FLOAT, [2, 3])], opset=17,
         extra_opsets=[("com.microsoft", 1)])
    # sequence output: not a tensor
    save("onnx_sequence_out", [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0),
                               helper.make_node("SequenceLength", ["seq"], ["n"])],
         [T("x", TP.FLOAT, [3, 2])], [T("n", TP.INT64, [])], opset=13)
    # big initializers in an external data file (model.onnx + model.onnx.data)
    big = {f"W{i}": f(256, 256) for i in range(3)}
    nodes = [helper.make_node("MatMul", ["x", "W0"], ["h0"]), helper.make_node("Relu", ["h0"], ["r0"]),
             helper.make_node("MatMul", ["r0", "W1"], ["h1"]), helper.make_node("Tanh", ["h1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "W2"], ["y"])]
    graph = helper.make_graph(nodes, "ext", [T("x", TP.FLOAT, ["n", 256])], [T("y", TP.FLOAT, ["n", 256])],
                              [numpy_helper.from_array(v, k) for k, v in big.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    ext_dir = out / "onnx_external"
    ext_dir.mkdir(exist_ok=True)
    onnx.save(model, ext_dir / "onnx_external_data.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="onnx_external_data.onnx.data", size_threshold=1024)
    _meta(ext_dir / "onnx_external_data.onnx", dyn={"0": [[1, 256], [3, 256]]})
    # external data, one file per tensor, in a subfolder
    ext2 = out / "onnx_external_sub"
    (ext2 / "weights").mkdir(parents=True, exist_ok=True)
    model2 = helper.make_model(helper.make_graph(nodes, "ext2", [T("x", TP.FLOAT, [1, 256])],
                                                 [T("y", TP.FLOAT, [1, 256])],
                                                 [numpy_helper.from_array(v, k) for k, v in big.items()]),
                               opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    from onnx.external_data_helper import convert_model_to_external_data
    convert_model_to_external_data(model2, all_tensors_to_one_file=False, size_threshold=1024)
    for init in model2.graph.initializer:
        for entry in init.external_data:
            if entry.key == "location":
                entry.value = "weights/" + init.name + ".bin"
    onnx.save_model(model2, ext2 / "onnx_external_files.onnx")
    print("built external data models", flush=True)

    # quantized: QDQ and QOperator from onnxruntime.quantization
    conv_path = save("onnx_conv_float", [
        helper.make_node("Conv", ["x", "W1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "W2", "b2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]), helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["fl"]), helper.make_node("Gemm", ["fl", "Wd", "bd"], ["y"], transB=1)],
        [T("x", TP.FLOAT, [1, 3, 16, 16])], [T("y", TP.FLOAT, [1, 10])],
        {"W1": f(8, 3, 3, 3) * 0.3, "b1": f(8) * 0.1, "W2": f(16, 8, 3, 3) * 0.2, "b2": f(16) * 0.1,
         "Wd": f(10, 16), "bd": f(10)}, opset=13)
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    for fmt, name, act in ((QuantFormat.QDQ, "onnx_qdq_static", QuantType.QUInt8),
                           (QuantFormat.QDQ, "onnx_qdq_int8_s8s8", QuantType.QInt8),
                           (QuantFormat.QOperator, "onnx_qoperator_qlinearconv", QuantType.QUInt8)):
        quantize_static(str(conv_path), str(out / f"{name}.onnx"), _conv_calibration(), quant_format=fmt,
                        activation_type=act, weight_type=QuantType.QInt8)
        print("built", name, flush=True)
    # QDQ with uint8 graph input (quantized I/O)
    save("onnx_quantized_io", [helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["x"]),
                               helper.make_node("Relu", ["x"], ["r"]),
                               helper.make_node("QuantizeLinear", ["r", "s", "z"], ["yq"])],
         [T("xq", TP.UINT8, [1, 8])], [T("yq", TP.UINT8, [1, 8])],
         {"s": np.float32(0.05), "z": np.uint8(128)}, opset=13)

    # string input (ORT runs string ops)
    save("onnx_string_io", [helper.make_node("StringNormalizer", ["s"], ["y"], case_change_action="UPPER",
                                             is_case_sensitive=0)],
         [T("s", TP.STRING, [3])], [T("y", TP.STRING, [3])], opset=13)


def build_tflite_extra(out: Path) -> None:
    """Converter modes and TFLite features the first set lacks: sparse weights, buffers after the flatbuffer,
    per-tensor int8, a static hash table (CALL_ONCE + HASHTABLE ops), resource variables."""
    import tensorflow as tf

    keras = tf.keras
    L = keras.layers
    keras.utils.set_random_seed(1)

    def save(name, data, **meta):
        (out / name).write_bytes(data)
        if meta:
            _meta(out / name, **meta)
        print("built", name, flush=True)

    def rep():
        r = np.random.default_rng(2)
        for _ in range(16):
            yield [r.random((1, 16, 16, 3), np.float32)]

    x = keras.Input((16, 16, 3))
    h = L.Conv2D(16, 3, activation="relu")(x)
    h = L.Flatten()(h)
    dense = L.Dense(32, activation="relu")
    h = dense(h)
    model = keras.Model(x, L.Dense(4)(h))
    w, b = dense.get_weights()
    w[np.abs(w) < np.quantile(np.abs(w), 0.9)] = 0.0  # 90% zeros: the converter stores it sparse
    dense.set_weights([w, b])
    with _section("sparse"):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
        save("tfl_sparse_float.tflite", conv.convert())
    with _section("sparse int8"):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY, tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep
        save("tfl_sparse_int8.tflite", conv.convert())
    with _section("buffer offset"):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv._experimental_use_buffer_offset = True
        save("tfl_buffer_offset.tflite", conv.convert())
    with _section("per-tensor int8"):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep
        conv._experimental_disable_per_channel = True
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = conv.inference_output_type = tf.uint8
        save("tfl_per_tensor_int8.tflite", conv.convert())

    with _section("hashtable"):
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant([b"alpha", b"Beta", b"gamma x", b"delta"]),
                                                tf.constant([1, 2, 3, 4], tf.int64)), default_value=-1)

        class Lookup(tf.Module):
            def __init__(self):
                self.table = table

            @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
            def __call__(self, words):
                return self.table.lookup(words)

        mod = Lookup()
        sm = out / "_hashtable_savedmodel"
        tf.saved_model.save(mod, str(sm), signatures=mod.__call__.get_concrete_function())
        conv = tf.lite.TFLiteConverter.from_saved_model(str(sm))
        save("tfl_hashtable.tflite", conv.convert(), dyn={"0": [[3], [5]]})

    with _section("int16 I/O"):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep
        conv.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        conv.inference_input_type = conv.inference_output_type = tf.int16
        save("tfl_int16_io.tflite", conv.convert())

    with _section("resource variables"):
        class Counter(tf.Module):
            def __init__(self):
                self.scale = tf.Variable(2.0)

            @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32)])
            def __call__(self, v):
                return v * self.scale.read_value()

        mod = Counter()
        sm = out / "_variables_savedmodel"
        tf.saved_model.save(mod, str(sm), signatures=mod.__call__.get_concrete_function())
        conv = tf.lite.TFLiteConverter.from_saved_model(str(sm))
        conv.experimental_enable_resource_variables = True
        save("tfl_resource_variable.tflite", conv.convert())


def build_tflite_edges(out: Path) -> None:
    """Constants without elements, data-dependent shapes, loops that grow a tensor."""
    import tensorflow as tf

    def conv(fn, name, **meta):
        with _section(name):
            c = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
            (out / f"{name}.tflite").write_bytes(c.convert())
            if meta:
                _meta(out / f"{name}.tflite", **meta)
            print("built", name, flush=True)

    @tf.function(input_signature=[tf.TensorSpec([1], tf.float32)])
    def to_scalar(v):
        return tf.reshape(v, []) * 2.0

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def empty_concat(v):
        return tf.concat([v, tf.zeros([0])], 0) + 1.0, tf.reduce_sum(v, axis=[])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def unique(v):
        y, idx = tf.unique(v)
        return tf.cast(y, tf.float32) * 0.5, idx

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32), tf.TensorSpec([], tf.int32)])
    def grow(v, n):
        def body(i, acc):
            return i + 1, tf.concat([acc, v], 0)
        _, acc = tf.while_loop(lambda i, acc: i < n, body, [tf.constant(0), tf.zeros([0])],
                               shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])
        return tf.nn.softmax(acc)

    conv(to_scalar, "tfl_reshape_to_scalar")
    conv(empty_concat, "tfl_empty_const")
    conv(unique, "tfl_unique_cast", int_low={"v": 0}, int_high={"v": 5}, dyn={"v": [[6], [3]]})
    conv(grow, "tfl_while_grow", int_low={"n": 1}, int_high={"n": 4})


def build_onnx_extra(out: Path) -> None:
    """ONNX features the first set lacks: no inputs at all, ai.onnx.ml, an old opset/IR, int4 weights,
    per-channel QDQ, odd input names."""
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(5)
    T = helper.make_tensor_value_info

    def save(name, nodes, inputs, outputs, inits=(), opsets=(("", 17),), ir=9, **meta):
        return _save_onnx(out, name, nodes, inputs, outputs, inits, opsets, ir, **meta)

    with _section("no inputs"):
        save("onnx_no_inputs", [helper.make_node("ConstantOfShape", ["shape"], ["y"],
                                                 value=numpy_helper.from_array(np.array([1.5], np.float32))),
                                helper.make_node("Range", ["a", "b", "c"], ["r"])],
             [], [T("y", TP.FLOAT, [2, 3]), T("r", TP.INT64, [4])],
             [numpy_helper.from_array(np.array([2, 3], np.int64), "shape"),
              numpy_helper.from_array(np.int64(0), "a"), numpy_helper.from_array(np.int64(8), "b"),
              numpy_helper.from_array(np.int64(2), "c")])
    with _section("ai.onnx.ml"):
        save("onnx_ml_scaler_linear", [
            helper.make_node("Scaler", ["x"], ["s"], domain="ai.onnx.ml", offset=[0.5, 0.1, 0.0],
                             scale=[2.0, 1.0, 0.5]),
            helper.make_node("LinearRegressor", ["s"], ["y"], domain="ai.onnx.ml",
                             coefficients=[0.3, -0.2, 1.0, 0.1, 0.4, -0.5], intercepts=[0.1, -0.1], targets=2)],
            [T("x", TP.FLOAT, ["n", 3])], [T("y", TP.FLOAT, ["n", 2])],
            opsets=(("", 17), ("ai.onnx.ml", 3)), dyn={"0": [[1, 3], [4, 3]]})
    with _section("old opset"):
        save("onnx_opset8_ir3", [helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 2.0],
                                                  mode="nearest"),
                                 helper.make_node("Sigmoid", ["y"], ["z"])],
             [T("x", TP.FLOAT, [1, 2, 3, 3])], [T("z", TP.FLOAT, [1, 2, 6, 6])], opsets=(("", 8),), ir=3)
    with _section("int4 weights"):
        w = rng.integers(-8, 8, (8, 4)).astype(np.int8)
        w4 = helper.make_tensor("w4", TP.INT4, [8, 4], w.flatten().tolist())
        save("onnx_int4_weights_op21", [
            helper.make_node("DequantizeLinear", ["w4", "ws"], ["w"], axis=0),
            helper.make_node("MatMul", ["x", "w"], ["y"])],
            [T("x", TP.FLOAT, [2, 8])], [T("y", TP.FLOAT, [2, 4])],
            [w4, numpy_helper.from_array(np.float32(0.05), "ws")], opsets=(("", 21),), ir=10)
    with _section("odd names"):
        save("onnx_odd_names", [helper.make_node("Add", ["input:0", "x/y é"], ["out put:0"]),
                                helper.make_node("Neg", ["out put:0"], ["Ω"])],
             [T("input:0", TP.FLOAT, [3]), T("x/y é", TP.FLOAT, [3])],
             [T("out put:0", TP.FLOAT, [3]), T("Ω", TP.FLOAT, [3])])
    with _section("declared shapes inference contradicts"):
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Abs", ["h"], ["y"])],
                                  "stale", [T("x", TP.FLOAT, [2, 3])], [T("y", TP.FLOAT, [2, 4])],
                                  value_info=[T("h", TP.FLOAT, [2, 5])])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9),
                  out / "onnx_stale_declared_shapes.onnx")  # the checker refuses it; the runtimes run it
        print("built onnx_stale_declared_shapes", flush=True)
    with _section("dynamic quantization"):
        from onnxruntime.quantization import QuantType, quantize_dynamic

        mlp = save("onnx_mlp_float", [helper.make_node("MatMul", ["x", "W1"], ["h"]),
                                      helper.make_node("Add", ["h", "b1"], ["hb"]),
                                      helper.make_node("Relu", ["hb"], ["r"]),
                                      helper.make_node("MatMul", ["r", "W2"], ["y"])],
                   [T("x", TP.FLOAT, ["batch", 32])], [T("y", TP.FLOAT, ["batch", 8])],
                   [numpy_helper.from_array(rng.standard_normal((32, 64)).astype(np.float32), "W1"),
                    numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b1"),
                    numpy_helper.from_array(rng.standard_normal((64, 8)).astype(np.float32), "W2")],
                   opsets=(("", 13),), dyn={"0": [[1, 32], [3, 32]]})
        for src, name in ((mlp, "onnx_dynamic_quant_mlp"), (out / "onnx_conv_float.onnx", "onnx_dynamic_quant_conv")):
            if src.is_file():
                quantize_dynamic(str(src), str(out / f"{name}.onnx"), weight_type=QuantType.QUInt8)
                if "mlp" in name:
                    _meta(out / f"{name}.onnx", dyn={"0": [[1, 32], [3, 32]]})
                print("built", name, flush=True)
    with _section("dynamic H/W conv"):
        nodes = [helper.make_node("Conv", ["x", "W1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c1"], ["r"]), helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2],
                                                                          strides=[2, 2]),
                 helper.make_node("Conv", ["p", "W2"], ["y"], kernel_shape=[3, 3])]
        save("onnx_conv_dynamic_hw", nodes, [T("x", TP.FLOAT, ["N", 8, "H", "W"])],
             [T("y", TP.FLOAT, ["N", 16, None, None])],
             [numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "W1"),
              numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), "W2")],
             dyn={"0": [[1, 8, 16, 16], [2, 8, 11, 17]]})
    with _section("per-channel QDQ"):
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

        if (out / "onnx_conv_float.onnx").is_file():
            quantize_static(str(out / "onnx_conv_float.onnx"), str(out / "onnx_qdq_per_channel.onnx"),
                            _conv_calibration(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
            print("built onnx_qdq_per_channel", flush=True)


def build_ir_extra(out: Path) -> None:
    """An IR with OpenVINO pre-processing baked in (u8 NHWC input), and one whose ports have no names."""
    import openvino as ov

    (out / "ir").mkdir(exist_ok=True)
    with _section("ppp"):
        model = ov.convert_model(str(out / "onnx_conv_float.onnx"))
        ppp = ov.preprocess.PrePostProcessor(model)
        ppp.input().tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC"))
        ppp.input().model().set_layout(ov.Layout("NCHW"))
        ppp.input().preprocess().convert_element_type(ov.Type.f32).scale(255.0)
        ov.save_model(ppp.build(), str(out / "ir" / "ir_ppp_u8_nhwc.xml"))
        print("built ir_ppp_u8_nhwc", flush=True)
    with _section("unnamed"):
        from openvino import opset13 as ops

        a = ops.parameter([2, 3], ov.Type.f32)
        b = ops.parameter([2, 3], ov.Type.i32)
        y = ops.add(a, ops.convert(b, ov.Type.f32))
        z = ops.multiply(a, ops.constant(np.float32(3.0)))
        model = ov.Model([y, z], [a, b], "unnamed")
        ov.save_model(model, str(out / "ir" / "ir_unnamed_ports.xml"))
        print("built ir_unnamed_ports", flush=True)


def build_renamed(out: Path) -> None:
    """Copies under names that say nothing (no or a wrong extension; spaces and non-ASCII in the folder): the
    format comes from the bytes."""
    import shutil

    folder = out / "renamed dir é"
    folder.mkdir(exist_ok=True)
    for src, name in (("onnx_conv_float.onnx", "conv_onnx_model"), ("tfl_conv2d_int8_int8io.tflite", "tfl_model.bin"),
                      ("onnx_symbolic_multi_out.onnx", "model.tflite"), ("tfl_dynbatch_float.tflite", "model.onnx")):
        if (out / src).is_file():
            shutil.copy(out / src, folder / name)
            meta = out / (src + ".meta.json")
            if meta.is_file():
                shutil.copy(meta, folder / (name + ".meta.json"))
    ir = out / "ir" / "ir_conv_fp32.xml"
    if ir.is_file():
        shutil.copy(ir, folder / "ir model.xml")
        shutil.copy(ir.with_suffix(".bin"), folder / "ir model.bin")
    ext = out / "onnx_external"
    if ext.is_dir():
        target = folder / "external copy"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(ext, target)
    print("built renamed copies", flush=True)


def build_tf2onnx(out: Path) -> None:
    import subprocess

    for src, name, extra in (("_conv_savedmodel", "onnx_tf2onnx_conv", []),
                             ("_dyn_savedmodel", "onnx_tf2onnx_dynbatch", [])):
        if not (out / src).is_dir():
            continue
        cmd = [sys.executable, "-m", "tf2onnx.convert", "--saved-model", str(out / src), "--output",
               str(out / f"{name}.onnx"), "--opset", "15", *extra]
        r = subprocess.run(cmd, capture_output=True, text=True)
        print("built" if r.returncode == 0 else "FAILED", name, r.stderr[-300:] if r.returncode else "", flush=True)
        if name.endswith("dynbatch"):
            _meta(out / f"{name}.onnx", dyn={"0": [[1, 10], [3, 10]]})
    for tfl, name in (("tfl_conv2d_int8_uint8io.tflite", "onnx_tf2onnx_from_tflite_int8"),
                      ("tfl_lstm_float.tflite", "onnx_tf2onnx_from_tflite_lstm"),
                      ("tfl_mha_float.tflite", "onnx_tf2onnx_from_tflite_mha")):
        if not (out / tfl).is_file():
            continue
        cmd = [sys.executable, "-m", "tf2onnx.convert", "--tflite", str(out / tfl), "--output",
               str(out / f"{name}.onnx"), "--opset", "17"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        print("built" if r.returncode == 0 else "FAILED", name, r.stderr[-300:] if r.returncode else "", flush=True)


def build_ir(out: Path) -> None:
    import openvino as ov

    def save(model, name, compress, **meta):
        path = out / "ir" / f"{name}.xml"
        path.parent.mkdir(exist_ok=True)
        ov.save_model(model, str(path), compress_to_fp16=compress)
        if meta:
            _meta(path, **meta)
        print("built", name, flush=True)

    for src, name, meta in (("onnx_conv_float.onnx", "ir_conv", {}),
                            ("onnx_symbolic_multi_out.onnx", "ir_symbolic_multi_out",
                             {"dyn": {"0": [[1, 2, 6], [3, 7, 6]]}}),
                            ("onnx_bool_int64_io.onnx", "ir_bool_int64", {}),
                            ("onnx_qdq_static.onnx", "ir_qdq", {}),
                            ("onnx_float16_io.onnx", "ir_float16_io", {}),
                            ("onnx_passthrough.onnx", "ir_passthrough", {}),
                            ("onnx_topk_nonzero_range.onnx", "ir_topk_nonzero_range",
                             {"int_low": [None, 2, 1], "int_high": [None, 9, 3], "fixed": {"2": [3, 4]}}),
                            ("onnx_loop_op16.onnx", "ir_loop", {"int_high": [None, 6, None],
                                                                 "int_low": [None, 1, None]})):
        if not (out / src).is_file():
            continue
        try:
            model = ov.convert_model(str(out / src))
        except Exception as exc:
            print(f"skip {name}: {str(exc).splitlines()[0][:200]}")
            continue
        save(model, f"{name}_fp16", True, **meta)
        save(model, f"{name}_fp32", False, **meta)
    if (out / "_conv_savedmodel").is_dir():
        save(ov.convert_model(str(out / "_conv_savedmodel")), "ir_from_tf_savedmodel", True)
    if (out / "_dyn_savedmodel").is_dir():
        save(ov.convert_model(str(out / "_dyn_savedmodel")), "ir_from_tf_dynbatch", False,
             dyn={"0": [[1, 10], [3, 10]]})
    for tfl, name in (("tfl_conv2d_int8_int8io.tflite", "ir_from_tflite_int8"),
                      ("tfl_dynspatial.tflite", "ir_from_tflite_dynspatial")):
        if (out / tfl).is_file():
            meta = {"dyn": {"0": [[1, 9, 13, 3], [3, 16, 16, 3]]}} if "dynspatial" in name else {}
            save(ov.convert_model(str(out / tfl)), name, False, **meta)
    # bounded dynamic dimension, and a reshape to dynamic from a static ONNX
    if (out / "onnx_conv_float.onnx").is_file():
        model = ov.convert_model(str(out / "onnx_conv_float.onnx"))
        model.reshape({0: ov.PartialShape([ov.Dimension(1, 4), 3, ov.Dimension(8, 32), ov.Dimension(8, 32)])})
        save(model, "ir_conv_bounded_dynamic", False, dyn={"0": [[1, 3, 16, 16], [3, 3, 9, 12]]})


# ---------------------------------------------------------------------------------------------------------
# Checking (one model per child process)
# ---------------------------------------------------------------------------------------------------------

def _threads() -> int:
    from edgeaccel.executors.base import default_threads

    return default_threads()


class RawLiteRT:
    runtime = "litert"

    def __init__(self, path: Path) -> None:
        from ai_edge_litert.interpreter import Interpreter

        self.interp = Interpreter(model_path=str(path), num_threads=_threads())
        self.interp.allocate_tensors()
        self.ins = self.interp.get_input_details()
        self.shapes = [tuple(d["shape"]) for d in self.ins]

    def input_specs(self):
        return [(d["name"], [int(s) if s >= 0 else None for s in d["shape_signature"]], np.dtype(d["dtype"]))
                for d in self.ins]

    def run(self, arrays):
        shapes = [a.shape for a in arrays]
        if shapes != self.shapes:
            for d, a in zip(self.ins, arrays, strict=True):
                self.interp.resize_tensor_input(d["index"], list(a.shape))
            self.interp.allocate_tensors()
            self.shapes = shapes
        for d, a in zip(self.ins, arrays, strict=True):
            self.interp.set_tensor(d["index"], a)
        self.interp.invoke()
        return {d["name"]: self.interp.get_tensor(d["index"]) for d in self.interp.get_output_details()}


class RawORT:
    runtime = "onnxruntime"

    def __init__(self, path: Path) -> None:
        import onnxruntime as ort

        self.sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def input_specs(self):
        types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
                 "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
                 "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_, "tensor(string)": object,
                 "tensor(int16)": np.int16, "tensor(uint16)": np.uint16}
        return [(i.name, [d if isinstance(d, int) else None for d in i.shape] if i.shape is not None else None,
                 np.dtype(types.get(i.type, object))) for i in self.sess.get_inputs()]

    def run(self, arrays):
        names = [i.name for i in self.sess.get_inputs()]
        outs = self.sess.run(None, dict(zip(names, arrays, strict=True)))
        return {o.name: v for o, v in zip(self.sess.get_outputs(), outs, strict=True)}


class RawOV:
    runtime = "openvino"

    def __init__(self, path: Path) -> None:
        import openvino as ov

        core = ov.Core()
        self.compiled = core.compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        self.request = self.compiled.create_infer_request()

    def input_specs(self):
        specs = []
        for port in self.compiled.inputs:
            ps = port.get_partial_shape()
            shape = None if ps.rank.is_dynamic else [d.get_length() if d.is_static else None for d in ps]
            dtype = port.get_element_type().to_dtype()
            specs.append((port.get_any_name(), shape, np.dtype(dtype)))
        return specs

    def run(self, arrays):
        import openvino as ov

        for i, a in enumerate(arrays):
            self.request.set_input_tensor(i, ov.Tensor(np.asarray(a, order="C")))  # keeps 0-d arrays 0-d
        self.request.infer()
        result = {}
        for i, port in enumerate(self.compiled.outputs):
            value = self.request.get_output_tensor(i).data.copy()
            for name in port.get_names() or {f"#{i}"}:
                result[name] = value
            result[f"#{i}"] = value
        return result


RAW = {"litert": RawLiteRT, "onnxruntime": RawORT, "openvino": RawOV}


def _hint(meta: dict, key: str, pos: int, name: str):
    """A per-input hint from the model's meta file: a list by input position, or a dict by position or name."""
    value = meta.get(key)
    if isinstance(value, list):
        return value[pos] if pos < len(value) else None
    if isinstance(value, dict):
        return value.get(name, value.get(str(pos)))
    return None


def _input_sets(specs, meta, rng):
    """Two input sets: dynamic dims at two sizes (meta 'dyn' overrides), integers in the model's range."""
    sets = []
    for variant in range(2):
        arrays = []
        for pos, (name, shape, dtype) in enumerate(specs):
            fixed = _hint(meta, "fixed", pos, name)
            if fixed is not None:
                arrays.append(np.asarray(fixed, dtype=dtype))
                continue
            dyn = _hint(meta, "dyn", pos, name)
            if dyn is not None:
                dims = dyn[variant]
            elif shape is None:
                dims = [2, 3]
            else:
                dims = [d if d is not None else ((1, 3)[variant] if i == 0 else (4, 6)[variant])
                        for i, d in enumerate(shape)]
            lo, hi = _hint(meta, "int_low", pos, name), _hint(meta, "int_high", pos, name)
            if hi is not None and lo is None:
                lo = 0
            if dtype == np.bool_:
                a = rng.integers(0, 2, dims).astype(bool)
                if not dims:
                    a = np.array(bool(variant == 0))
            elif dtype.kind in "OSU":
                words = np.array([b"alpha", b"Beta", b"gamma x", b"", b"delta"], dtype=object)
                a = words[rng.integers(0, len(words), dims)] if dims else np.array(b"alpha", dtype=object)
                arrays.append(a)
                continue
            elif dtype.kind in "iu":
                info = np.iinfo(dtype)
                a = rng.integers(lo if lo is not None else max(info.min, -100),
                                 hi if hi is not None else min(info.max, 200), dims).astype(dtype)
            else:
                a = (rng.random(dims) * 2 - 1).astype(dtype)
            arrays.append(np.asarray(a, dtype=dtype))
        sets.append(arrays)
    return sets


def _compare(got, expected: dict, names, exact: bool) -> tuple[bool, str]:
    worst = 0.0
    for i, (name, g) in enumerate(zip(names, got, strict=True)):
        e = expected.get(name, expected.get(f"#{i}"))
        if e is None:
            e_list = [v for k, v in expected.items() if not k.startswith("#")]
            if i < len(e_list):
                e = e_list[i]
            else:
                return False, f"output {name!r} not in raw outputs {list(expected)}"
        g, e = np.asarray(g), np.asarray(e)
        if g.shape != e.shape:
            return False, f"output {name!r} shape {g.shape} vs raw {e.shape}"
        if g.dtype != e.dtype:
            return False, f"output {name!r} dtype {g.dtype} vs raw {e.dtype}"
        if g.dtype == object:
            if not np.array_equal(g, e):
                return False, f"output {name!r} strings differ"
            continue
        if exact:
            if not np.array_equal(g, e, equal_nan=g.dtype.kind in "fc"):
                diff = np.max(np.abs(g.astype(np.float64) - e.astype(np.float64))) if g.size else 0.0
                return False, f"output {name!r} max abs diff {diff:.3g}"
        else:
            if g.dtype.kind in "fc":
                if not np.allclose(g, e, rtol=1e-3, atol=1e-4, equal_nan=True):
                    diff = np.nanmax(np.abs(g.astype(np.float64) - e.astype(np.float64)))
                    return False, f"output {name!r} max abs diff {diff:.3g}"
                if g.size:
                    worst = max(worst, float(np.nanmax(np.abs(g.astype(np.float64) - e.astype(np.float64)))))
            elif not np.array_equal(g, e):
                return False, f"output {name!r} differs ({np.sum(g != e)} of {g.size} values)"
    return True, f"max abs diff {worst:.2g}" if not exact and worst else ""


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc).strip() else '(no message)'}"[:300]


def check_one(path: Path, cache_dir: Path) -> list[dict]:
    import edgeaccel
    from edgeaccel.errors import EdgeAccelError
    from edgeaccel.executors.registry import runtimes
    from edgeaccel.formats import detect_format

    meta_file = path.with_name(path.name + ".meta.json")
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    rows: list[dict] = []
    try:
        fmt = detect_format(path)
    except Exception as exc:
        return [{"model": path.name, "executor": "-", "result": "FALSE-REJECT", "note": _error_text(exc)}]
    claims = [name for name, d in runtimes().items() if fmt in d.formats and name != "tensorflow"]

    raws: dict[str, object] = {}
    raw_errors: dict[str, str] = {}

    def raw_for(runtime):
        if runtime not in raws and runtime not in raw_errors:
            try:
                raws[runtime] = RAW[runtime](path)
            except Exception as exc:
                raw_errors[runtime] = _error_text(exc)
        return raws.get(runtime)

    def run_raw(runtime, arrays):
        raw = raw_for(runtime)
        if raw is None:
            raise RuntimeError(raw_errors[runtime])
        return raw.run(arrays)

    def raw_runs(runtime) -> bool:
        try:
            for arrays in input_sets(runtime) or [None]:
                if arrays is None:
                    return False
                run_raw(runtime, arrays)
        except Exception:
            return False
        return True

    def input_sets(runtime):
        raw = raw_for(runtime)
        if raw is None:
            return None
        return _input_sets(raw.input_specs(), meta, np.random.default_rng(0))

    def check(label, load_kwargs, pinned, isolate=False):
        row = {"model": path.name, "executor": label, "path": str(path)}
        t0 = time.time()
        model = None
        try:
            model = edgeaccel.load(path, runtime=edgeaccel.RuntimeOptions(cache_dir=str(cache_dir), isolate=isolate),
                                   **load_kwargs)
        except Exception as exc:
            # pinned: that runtime's raw call is the reference; the default choice is fair only if no runtime
            # that reads the format runs the model raw
            runtime = pinned or next((c for c in claims if raw_runs(c)), claims[0] if claims else None)
            row["ea_error"] = _error_text(exc)
            row["clear"] = isinstance(exc, EdgeAccelError) and bool(str(exc).strip())
            _judge_failure(row, runtime, raw_for, run_raw, input_sets, exc)
            rows.append(row)
            return
        try:
            runtime = model.executor.runtime
            row["ran_on"] = runtime
            if model.fallbacks:
                row["fallbacks"] = [str(f) for f in model.fallbacks]
            sets = input_sets(runtime)
            if sets is None:
                row["result"] = "NO-RAW"
                row["note"] = f"raw {runtime} failed to load ({raw_errors[runtime]}) but edgeaccel loaded"
                # still run edgeaccel to see that it works
                rows.append(row)
                return
            notes = []
            ea_names = [t.name for t in model.inputs]
            raw_names = [s[0] for s in raw_for(runtime).input_specs()]
            if ea_names != raw_names:
                notes.append(f"input names {ea_names} vs raw {raw_names}")
            for arrays in sets:
                try:
                    expected = run_raw(runtime, arrays)
                except Exception as exc:
                    raw_exc = exc
                else:
                    raw_exc = None
                try:
                    got = model.run(arrays)
                except Exception as exc:
                    if raw_exc is not None:
                        row["result"] = "OK-REFUSED" if isinstance(exc, EdgeAccelError) else "UNCLEAR-ERROR"
                        row["note"] = f"run: {_error_text(exc)} / raw: {_error_text(raw_exc)}"
                    else:
                        row["result"] = "FALSE-REJECT"
                        row["note"] = f"run {[a.shape for a in arrays]}: {_error_text(exc)}"
                    break
                now = model.executor.runtime
                if now != runtime:  # a visible run-time fallback: fair only where the raw runtime fails too
                    if raw_exc is None:
                        row["result"] = "FALSE-REJECT"
                        row["note"] = f"fell back at run from {runtime}, which runs raw: {model.fallbacks[-1]}"
                        break
                    notes.append(f"fallback at run ({runtime} fails raw too): {str(model.fallbacks[-1])[:120]}")
                    runtime = row["ran_on"] = now
                    try:
                        expected, raw_exc = run_raw(runtime, arrays), None
                    except Exception as exc:
                        raw_exc = exc
                if raw_exc is not None:
                    row["result"] = "MISMATCH"
                    row["note"] = f"edgeaccel ran but raw failed: {_error_text(raw_exc)}"
                    break
                ok, note = _compare(got, expected, [t.name for t in model.outputs], exact=runtime != "openvino")
                if not ok:
                    row["result"] = "MISMATCH"
                    row["note"] = f"{[a.shape for a in arrays]}: {note}"
                    break
                if note:
                    notes.append(note)
            else:
                row["result"] = "OK"
            if notes and row["result"] == "OK":
                row["note"] = "; ".join(notes)
            elif notes:
                row["note"] = row.get("note", "") + "; " + "; ".join(notes)
            if row.get("fallbacks") and row["result"] == "OK":
                first = model.ranking.candidates[0].runtime if model.ranking.candidates else None
                if first and first != runtime and raw_runs(first):
                    row["result"] = "FALSE-REJECT"
                    row["note"] = f"fell back from {first}, which runs raw: {row['fallbacks'][0]}"
        finally:
            model.close()
            row["s"] = round(time.time() - t0, 2)
            rows.append(row)

    check("default", {}, None)
    check("default(warm cache)", {}, None)
    check("default(isolated)", {}, None, isolate=True)
    for name in claims:
        check(name, {"executor": name}, name)
    return rows


def _judge_failure(row, runtime, raw_for, run_raw, input_sets, exc):
    from edgeaccel.errors import EdgeAccelError

    if runtime is None:
        row["result"] = "OK-REFUSED" if row["clear"] else "UNCLEAR-ERROR"
        return
    raw = raw_for(runtime)
    raw_ok = False
    if raw is not None:
        try:
            for arrays in input_sets(runtime):
                run_raw(runtime, arrays)
            raw_ok = True
        except Exception as raw_exc:
            row["raw_error"] = _error_text(raw_exc)
    declared = _declared_outputs(row)
    if raw_ok and runtime == "openvino" and declared is not None and len(raw.compiled.outputs) != declared:
        # the raw runtime "runs" but without some of the model's outputs: refusing it is the right answer
        row["result"] = "OK-REFUSED" if row["clear"] else "UNCLEAR-ERROR"
        row["raw_error"] = f"raw OpenVINO gives {len(raw.compiled.outputs)} of the {declared} declared outputs"
    elif raw_ok:
        row["result"] = "FALSE-REJECT"
    else:
        row["result"] = "OK-REFUSED" if isinstance(exc, EdgeAccelError) and row["clear"] else "UNCLEAR-ERROR"
    row["note"] = row.pop("ea_error")


def _declared_outputs(row) -> int | None:
    from edgeaccel.formats import describe

    try:
        return len(describe(row["path"]).outputs)
    except Exception:
        return None


def models_in(folder: Path) -> list[Path]:
    """Every model file below ``folder`` (by content, as edgeaccel reads it: names may say nothing), except in
    folders whose name starts with '_' (build sources)."""
    from edgeaccel.formats import detect_format

    found = []
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or p.name.endswith(".meta.json") or any(
                part.startswith("_") for part in p.relative_to(folder).parts):
            continue
        try:
            detect_format(p)
        except Exception:
            continue
        found.append(p)
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/sweep"))
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--only", default="", help="check the models whose file name contains this")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", type=Path, help="write every row here too")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--build-step", choices=BUILD_STEPS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.build_step:
        args.out.mkdir(parents=True, exist_ok=True)
        globals()[f"build_{args.build_step}"](args.out)
        return 0
    if args.child:
        for row in check_one(args.child, args.out / "_cache"):
            print("ROW " + json.dumps(row), flush=True)
        return 0
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    marker = out / "_built"
    if args.rebuild or not marker.exists():
        for step in BUILD_STEPS:
            r = subprocess.run([sys.executable, __file__, "--out", str(out), "--build-step", step])
            if r.returncode:
                print(f"build step {step} failed (rc {r.returncode})", flush=True)
        marker.write_text(time.ctime())
    if args.build_only:
        return 0
    import shutil

    shutil.rmtree(out / "_cache", ignore_errors=True)
    rows = []
    counts: dict[str, int] = {}
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    models = [p for p in models_in(out) if args.only in str(p.relative_to(out))]
    for path in models:
        cmd = [sys.executable, __file__, "--out", str(out), "--child", str(path)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
            got = [json.loads(line[4:]) for line in r.stdout.splitlines() if line.startswith("ROW ")]
            if r.returncode != 0:
                tail = (r.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
                got.append({"model": path.name, "executor": "-", "result": "CRASH",
                            "note": f"child exit {r.returncode}: {tail[:300]}"})
        except subprocess.TimeoutExpired:
            got = [{"model": path.name, "executor": "-", "result": "CRASH", "note": f"timeout {args.timeout}s"}]
        for row in got:
            counts[row["result"]] = counts.get(row["result"], 0) + 1
            extra = f"  [ran on {row['ran_on']}]" if row.get("ran_on") and row["executor"].startswith("default") else ""
            print(f"{row['result']:<13} {row['model']:<44} {row['executor']:<20} {row.get('note', '')}{extra}",
                  flush=True)
            rows.append(row)
    print(f"\n{len(models)} models, {len(rows)} checks: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    bad = sum(v for k, v in counts.items() if k not in ("OK", "OK-REFUSED"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
