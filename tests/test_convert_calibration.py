"""Calibration data fitted to a model's inputs, and the errors that name the file and input when it does not fit."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import IMAGES
from edgeaccel import ConversionError
from edgeaccel.convert import calibration
from edgeaccel.modelinfo import Quantization, TensorSpec

FLOAT_IMAGE = TensorSpec("image", (1, 32, 32, 3), np.dtype(np.float32))
UINT8_IMAGE = TensorSpec("pixels", (1, 24, 24, 3), np.dtype(np.uint8), Quantization((1 / 128,), (128,)))


def test_stacked_npy_is_split_into_samples(tmp_path):
    data = np.random.default_rng(0).random((7, 32, 32, 3), dtype=np.float32)
    np.save(tmp_path / "x.npy", data)
    found = calibration.load(tmp_path / "x.npy", [FLOAT_IMAGE])
    assert len(found) == 7 and found.samples[3][0].shape == (1, 32, 32, 3)
    np.testing.assert_array_equal(found.samples[3][0][0], data[3])
    assert found.feeds()[0].keys() == {"image"}


def test_one_sample_of_the_input_shape_and_float64_are_accepted(tmp_path):
    np.save(tmp_path / "one.npy", np.zeros((1, 32, 32, 3)))  # float64: cast to the input's float32
    found = calibration.load(tmp_path / "one.npy", [FLOAT_IMAGE])
    assert len(found) == 1 and found.samples[0][0].dtype == np.float32


def test_save_round_trips(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((3, 32, 32, 3), np.float32))
    saved = calibration.load(tmp_path / "x.npy", [FLOAT_IMAGE]).save(tmp_path / "stored")
    assert saved.name == "stored.npy"
    assert len(calibration.load(saved, [FLOAT_IMAGE])) == 3


def test_max_samples_keeps_the_first(tmp_path):
    data = np.arange(10, dtype=np.float32)[:, None, None, None] * np.ones((10, 32, 32, 3), np.float32)
    np.save(tmp_path / "x.npy", data)
    found = calibration.load(tmp_path / "x.npy", [FLOAT_IMAGE], max_samples=4)
    assert [float(s[0].flat[0]) for s in found.samples] == [0, 1, 2, 3]


@pytest.mark.shared
def test_image_folder_is_preprocessed_like_edgeaccel_run():
    from edgeaccel.imageio import image_to_input, read_image

    found = calibration.load(IMAGES, [UINT8_IMAGE])
    assert len(found) == len(list(IMAGES.glob("*.png")))
    bird = image_to_input(read_image(IMAGES / "bird.png"), UINT8_IMAGE)[0]
    assert any(np.array_equal(s[0], bird) for s in found.samples)
    scaled = calibration.load(IMAGES, [FLOAT_IMAGE], normalize="-1,1")
    assert all(-1.0 <= s[0].min() and s[0].max() <= 1.0 for s in scaled.samples)


def test_npz_feeds_several_inputs_by_name(tmp_path):
    a = TensorSpec("a", (1, 4), np.dtype(np.float32))
    b = TensorSpec("b", (1, 2), np.dtype(np.int32))
    np.savez(tmp_path / "x.npz", a=np.ones((5, 4), np.float32), b=np.zeros((5, 2), np.int32))
    found = calibration.load(tmp_path / "x.npz", [a, b])
    assert len(found) == 5 and [x.shape for x in found.samples[0]] == [(1, 4), (1, 2)]


# -- bad calibration data: the error names the file and the input, and says what to do ---------------------

def test_wrong_shape_names_file_and_input(tmp_path):
    np.save(tmp_path / "small.npy", np.zeros((4, 28, 28, 3), np.float32))
    with pytest.raises(ConversionError, match=r"small\.npy has shape \[4, 28, 28, 3\]; input 'image' takes 1x32x32x3") \
            as info:
        calibration.load(tmp_path / "small.npy", [FLOAT_IMAGE])
    assert "(N, 32, 32, 3)" in info.value.hint


def test_transposed_layout_is_spotted(tmp_path):
    np.save(tmp_path / "nchw.npy", np.zeros((4, 3, 32, 32), np.float32))
    with pytest.raises(ConversionError, match="nchw.npy") as info:
        calibration.load(tmp_path / "nchw.npy", [FLOAT_IMAGE])
    assert "NCHW vs NHWC" in info.value.hint


def test_wrong_dtype_names_file_and_input(tmp_path):
    np.save(tmp_path / "pixels.npy", np.zeros((4, 32, 32, 3), np.uint8))
    with pytest.raises(ConversionError, match=r"pixels\.npy is uint8; input 'image' takes float32") as info:
        calibration.load(tmp_path / "pixels.npy", [FLOAT_IMAGE])
    assert "raw pixels" in info.value.hint


def test_nan_is_refused(tmp_path):
    data = np.zeros((2, 32, 32, 3), np.float32)
    data[1, 0, 0, 0] = np.nan
    np.save(tmp_path / "nan.npy", data)
    with pytest.raises(ConversionError, match="nan.npy holds NaN"):
        calibration.load(tmp_path / "nan.npy", [FLOAT_IMAGE])


def test_empty_folder_says_what_it_found(tmp_path):
    (tmp_path / "README.txt").write_text("no images here")
    with pytest.raises(ConversionError, match=r"holds no images or \.npy files \(found: README\.txt\)"):
        calibration.load(tmp_path, [FLOAT_IMAGE])


def test_missing_path_and_unknown_kind(tmp_path):
    with pytest.raises(ConversionError, match="not found"):
        calibration.load(tmp_path / "nope", [FLOAT_IMAGE])
    (tmp_path / "data.csv").write_text("1,2,3")
    with pytest.raises(ConversionError, match="data.csv is neither"):
        calibration.load(tmp_path / "data.csv", [FLOAT_IMAGE])


def test_broken_image_names_the_file(tmp_path):
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    with pytest.raises(ConversionError, match=r"calibration image .*a\.png"):
        calibration.load(tmp_path, [FLOAT_IMAGE])


def test_images_cannot_feed_a_non_image_input(tmp_path):
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    vector = TensorSpec("features", (1, 40), np.dtype(np.float32))
    with pytest.raises(ConversionError, match="not an image tensor"):
        calibration.load(tmp_path, [vector])


def test_npz_without_an_input_names_it(tmp_path):
    a = TensorSpec("a", (1, 4), np.dtype(np.float32))
    b = TensorSpec("b", (1, 2), np.dtype(np.float32))
    np.savez(tmp_path / "x.npz", a=np.ones((5, 4), np.float32))
    with pytest.raises(ConversionError, match="no array for input 'b'"):
        calibration.load(tmp_path / "x.npz", [a, b])
    np.save(tmp_path / "x.npy", np.ones((5, 4), np.float32))
    with pytest.raises(ConversionError, match="takes 2 inputs") as info:
        calibration.load(tmp_path / "x.npy", [a, b])
    assert ".npz" in info.value.hint
