"""Compiled-model caching (OpenVINO's cache dir, ONNX Runtime's optimized model), the validation memo,
and the size bound."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS
from edgeaccel.cachedir import trim

pytestmark = pytest.mark.shared


def test_openvino_and_onnxruntime_fill_the_cache_and_reuse_it(tmp_path):
    x = np.random.default_rng(0).integers(0, 256, (1, 224, 224, 3), dtype=np.uint8)
    outputs = []
    for _ in range(2):
        with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", cache_dir=tmp_path) as model:
            outputs.append(model.run(x)[0])
            from_cache = model.executor.details["optimized_model_from_cache"]
    assert from_cache is True
    np.testing.assert_array_equal(outputs[0], outputs[1])
    assert list((tmp_path / "onnxruntime").glob("*.onnx"))
    assert list((tmp_path / "validated").rglob("*.json"))  # the onnx checker ran once for these bytes
    with edgeaccel.load(MODELS / "openvino" / "mobilenet_v2_1.0_224_quant.xml", cache_dir=tmp_path) as model:
        model.run(x)
    assert any((tmp_path / "openvino").iterdir())


def test_no_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEACCEL_CACHE_DIR", str(tmp_path))
    with edgeaccel.load(MODELS / "mobilenet_v2_1.0_224_quant.onnx", cache=False) as model:
        assert model.executor.details["optimized_model_from_cache"] is False
    assert not any(tmp_path.iterdir())


def test_trim_keeps_the_cache_within_its_bound(tmp_path):
    folder = tmp_path / "openvino"
    folder.mkdir()
    for i in range(5):
        (folder / f"blob{i}").write_bytes(b"x" * 1000)
    freed = trim(tmp_path, limit=2500)
    assert freed == 3000
    assert sum(p.stat().st_size for p in folder.iterdir()) <= 2500


def test_validation_memo_recalls_the_same_bytes_at_any_path(tmp_path):
    import shutil

    from edgeaccel import formats
    from edgeaccel.selection.cache import ValidationMemo

    memo = ValidationMemo(tmp_path / "cache")
    first = formats.describe(MODELS / "split_concat.tflite", memo)
    copy = tmp_path / "elsewhere.tflite"
    shutil.copy(MODELS / "split_concat.tflite", copy)
    again = formats.describe(copy, memo)
    assert again == first.__class__(**{**first.__dict__, "path": copy}) and again.path == copy
    (memo.folder / f"{first.digest}.json").write_text("{not json")
    assert formats.describe(copy, memo).inputs == first.inputs  # a damaged memo is validated again


def test_a_memo_made_under_other_rules_is_not_trusted(tmp_path, monkeypatch):
    """A rule added after a model crashed a runtime must see that model again after an upgrade."""
    from edgeaccel import formats
    from edgeaccel.selection import cache

    model = MODELS / "split_concat.tflite"
    with monkeypatch.context() as older:
        older.setattr(cache, "validation_rules_key", lambda: "older-rules")
        old = cache.ValidationMemo(tmp_path)
        info = formats.describe(model, old)
        assert old.recall(info.digest, model) is not None
    now = cache.ValidationMemo(tmp_path)
    assert now.folder != old.folder and now.recall(info.digest, model) is None


def test_validation_memo_checks_the_ir_weights_again(tmp_path):
    import shutil

    from edgeaccel import formats
    from edgeaccel.selection.cache import ValidationMemo
    from edgeaccel.errors import ModelValidationError

    src = MODELS / "openvino"
    shutil.copy(src / "mobilenet_v2_1.0_224_quant.xml", tmp_path / "m.xml")
    shutil.copy(src / "mobilenet_v2_1.0_224_quant.bin", tmp_path / "m.bin")
    memo = ValidationMemo(tmp_path / "cache")
    formats.describe(tmp_path / "m.xml", memo)
    data = (tmp_path / "m.bin").read_bytes()
    (tmp_path / "m.bin").write_bytes(data[: len(data) // 2])  # the .bin changed beside a remembered .xml
    with pytest.raises(ModelValidationError):
        formats.describe(tmp_path / "m.xml", memo)
