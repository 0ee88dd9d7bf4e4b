"""Models the conversion tests build themselves (no model is downloaded): a seeded synthetic image task, a
numpy-trained MLP written as ONNX (no TensorFlow needed), and a small Keras CNN (TensorFlow tests only).

The task is made hard enough that the float models are not saturated (accuracy well below 100%), so that
top-1 agreement after quantization measures something: a quantizer that gets ranges wrong flips answers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CLASSES = 10
SIZE = 16


def dataset(n: int, seed: int, noise: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
    """n float32 images (n, 16, 16, 3) in about [-1, 1] and their labels: smooth per-class patterns + noise.

    The class patterns come from a fixed seed, the samples from ``seed``: train and held-out sets share
    the task but not the samples."""
    protos = np.random.default_rng(1234).normal(size=(CLASSES, 4, 4, 3)).astype(np.float32)
    protos = np.kron(protos, np.ones((1, SIZE // 4, SIZE // 4, 1), np.float32))  # smooth 16x16 patterns
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, n)
    images = 0.35 * (protos[labels] + noise * rng.normal(size=(n, SIZE, SIZE, 3)))
    return images.astype(np.float32), labels


def train_mlp(x: np.ndarray, y: np.ndarray, hidden: int = 256, steps: int = 150, seed: int = 0) -> dict:
    """A two-layer MLP trained with Adam on softmax cross-entropy, in numpy (seconds, deterministic)."""
    rng = np.random.default_rng(seed)
    flat = x.reshape(len(x), -1)
    params = {"w1": rng.normal(0, np.sqrt(2 / flat.shape[1]), (flat.shape[1], hidden)).astype(np.float32),
              "b1": np.zeros(hidden, np.float32),
              "w2": rng.normal(0, np.sqrt(1 / hidden), (hidden, CLASSES)).astype(np.float32),
              "b2": np.zeros(CLASSES, np.float32)}
    moments = {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in params.items()}
    onehot = np.eye(CLASSES, dtype=np.float32)[y]
    for t in range(1, steps + 1):
        h = np.maximum(flat @ params["w1"] + params["b1"], 0)
        probs = _softmax(h @ params["w2"] + params["b2"])
        d_logits = (probs - onehot) / len(flat)
        d_h = (d_logits @ params["w2"].T) * (h > 0)
        grads = {"w2": h.T @ d_logits, "b2": d_logits.sum(0), "w1": flat.T @ d_h, "b1": d_h.sum(0)}
        for k, g in grads.items():
            m, v = moments[k]
            m[:] = 0.9 * m + 0.1 * g
            v[:] = 0.999 * v + 0.001 * g * g
            params[k] -= 1e-3 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return params


def mlp_predict(params: dict, x: np.ndarray) -> np.ndarray:
    h = np.maximum(x.reshape(len(x), -1) @ params["w1"] + params["b1"], 0)
    return _softmax(h @ params["w2"] + params["b2"])


def mlp_onnx(params: dict, path: Path, ir_version: int | None = None) -> Path:
    """The MLP as an ONNX graph: image [1,16,16,3] -> Flatten -> Gemm -> Relu -> Gemm -> Softmax."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Flatten", ["image"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["h_relu"]),
        helper.make_node("Gemm", ["h_relu", "w2", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["scores"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, SIZE, SIZE, 3])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, CLASSES])],
        [numpy_helper.from_array(v, k) for k, v in params.items()],
    )
    kwargs = {"ir_version": ir_version} if ir_version else {}
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], **kwargs)
    if not ir_version:
        model.ir_version = 9  # runtime facts: onnx 1.23 stamps IR 14 by default, which onnxruntime 1.31 refuses
    onnx.save(model, str(path))
    return path


def train_keras_cnn(x: np.ndarray, y: np.ndarray, seed: int = 0, epochs: int = 6):
    """Conv-Pool-Conv-Pool-Dense(256)-Dense(10): ~0.55M weights, so int8 is ~4x smaller than float."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([
        tf.keras.Input((SIZE, SIZE, 3), name="image"),
        tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(CLASSES, activation="softmax"),
    ])
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, shuffle=True)
    return model


def top1(scores: np.ndarray) -> np.ndarray:
    return scores.reshape(len(scores), -1).argmax(axis=1)


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
