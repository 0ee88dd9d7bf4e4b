"""A model is its weights too: an OpenVINO IR's .xml is the same for every weight set of one network (a fine-tuned
export differs only in its .bin), and an ONNX model with external data reads its weights from another file. The
digest every cache is keyed by (measurements, calibration verdicts, compiled models, the validation memo) covers
those files, and a model recalled from the validation memo reads its own .bin, not one of another name beside it."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("onnx")


def _matmul_ir(folder, name="model"):
    """A float MatMul as an OpenVINO IR (.xml + .bin), converted from ONNX by OpenVINO itself."""
    from onnx import TensorProto, helper

    from onnx_models import save

    ov = pytest.importorskip("openvino")
    folder.mkdir(parents=True, exist_ok=True)
    w = np.arange(64, dtype=np.float32).reshape(8, 8) / 10
    onnx_path = save([helper.make_node("MatMul", ["x", "W"], ["y"])],
                     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], {"W": w},
                     folder / f"{name}.onnx")
    ov.save_model(ov.convert_model(str(onnx_path)), str(folder / f"{name}.xml"), compress_to_fp16=False)
    return folder / f"{name}.xml"


def _tuned(xml, to):
    """The same network with other weights (same .xml, a .bin of the same size, every weight negated)."""
    shutil.copy(xml, to)
    (-np.fromfile(xml.with_suffix(".bin"), np.float32)).tofile(to.with_suffix(".bin"))
    return to


def test_two_irs_with_one_xml_and_other_weights_have_other_digests(tmp_path):
    from edgeaccel import formats

    a = _matmul_ir(tmp_path / "a")
    b = _tuned(a, tmp_path / "b.xml")
    assert a.read_bytes() == b.read_bytes()
    assert formats.describe(a).digest != formats.describe(b).digest
    shutil.copy(a.with_suffix(".bin"), b.with_suffix(".bin"))  # the same weights again: the same model
    assert formats.describe(a).digest == formats.describe(b).digest


def test_onnx_external_data_is_part_of_the_digest(tmp_path):
    import onnx

    from edgeaccel import formats
    from edgeaccel.fuzzing import onnx_zoo

    digests = []
    for folder, scale in (("a", 1.0), ("b", 2.0)):
        model = onnx_zoo.mlp()
        for init in model.graph.initializer:
            values = onnx.numpy_helper.to_array(init) * scale
            init.CopyFrom(onnx.numpy_helper.from_array(values.astype(values.dtype), init.name))
        (tmp_path / folder).mkdir()
        onnx.save_model(model, str(tmp_path / folder / "m.onnx"), save_as_external_data=True,
                        all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
        digests.append(formats.describe(tmp_path / folder / "m.onnx").digest)
    assert (tmp_path / "a" / "m.onnx").read_bytes() == (tmp_path / "b" / "m.onnx").read_bytes()
    assert digests[0] != digests[1]


def test_an_ir_beside_a_twin_of_another_name_loads_its_own_weights_isolated_too(tmp_path):
    """Two IRs in one folder with the same .xml (an fp16 and an fp32 export of a network without weights to
    compress, or a copy under a new name): the second, recalled from the validation memo, read the first's .bin
    name, which the isolated worker's sandbox then refused to open. Outputs must be each model's own."""
    import edgeaccel
    from edgeaccel.options import RuntimeOptions

    a = _matmul_ir(tmp_path, "first")
    b = _tuned(a, tmp_path / "second.xml")
    c = tmp_path / "copy.xml"  # byte for byte the first: the memo recalls it, with its own .bin
    shutil.copy(a, c)
    shutil.copy(a.with_suffix(".bin"), c.with_suffix(".bin"))
    x = np.ones((1, 8), np.float32)
    cache = str(tmp_path / "cache")
    answers = {}
    for isolate in (False, True):
        for path in (a, b, c):
            with edgeaccel.load(path, executor="openvino",
                                runtime=RuntimeOptions(cache_dir=cache, isolate=isolate)) as model:
                answers[(path.name, isolate)] = model.run(x)[0]
                assert model.info.extra_files == (path.with_suffix(".bin"),)
    want = x @ (np.arange(64, dtype=np.float32).reshape(8, 8) / 10)
    for isolate in (False, True):
        np.testing.assert_allclose(answers[("first.xml", isolate)], want, rtol=1e-5)
        np.testing.assert_allclose(answers[("second.xml", isolate)], -want, rtol=1e-5)
        np.testing.assert_allclose(answers[("copy.xml", isolate)], want, rtol=1e-5)


def test_a_weights_file_changed_in_place_changes_the_digest(tmp_path):
    """The digest of a .bin is kept for the process while the file is unchanged; a rewrite is seen."""
    from edgeaccel import formats

    a = _matmul_ir(tmp_path)
    before = formats.describe(a).digest
    weights = np.fromfile(a.with_suffix(".bin"), np.float32)
    (weights * 3).tofile(a.with_suffix(".bin"))
    assert formats.describe(a).digest != before
