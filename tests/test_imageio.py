"""Image decoding and resizing without Pillow agree with Pillow, so the base install answers like the
reference pipelines do."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import IMAGES
from edgeaccel import imageio
from edgeaccel.imageio import resizing
from edgeaccel.errors import InputError
from edgeaccel.modelinfo import TensorSpec

pytestmark = pytest.mark.shared
NAMES = ["bird", "cat", "grace_hopper", "squat", "mnist_nine", "dog_segmentation"]


@pytest.fixture
def pillow():
    """Pillow's Image module, the reference these tests compare with; the other tests here run without it, as
    the base install does."""
    return pytest.importorskip("PIL.Image", reason="Pillow is not installed (pip install pillow): the comparisons "
                               "with it are skipped")


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_png_decoder_matches_pillow(pillow, name):
    data = (IMAGES / f"{name}.png").read_bytes()
    ours = imageio.decode_png(data, name)
    theirs = np.asarray(pillow.open(IMAGES / f"{name}.png").convert("L" if ours.shape[2] == 1 else "RGB"))
    np.testing.assert_array_equal(ours.reshape(theirs.shape), theirs)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("size", [(224, 224), (192, 192), (128, 128), (28, 28), (300, 200)])
def test_pillow_free_resize_matches_pillow(pillow, name, size):
    image = imageio.read_image(IMAGES / f"{name}.png")
    h, w = size
    ours = resizing._vertical(resizing._horizontal(image, w), h)
    theirs = np.asarray(pillow.fromarray(image.squeeze()).resize((w, h), pillow.Resampling.BILINEAR)).reshape(h, w, -1)
    assert np.abs(ours.astype(int) - theirs).max() <= 1  # bit-exact with Pillow <= 12, 1 LSB at most with 13


def test_image_fitted_to_nchw_float_and_gray_inputs():
    photo = imageio.read_image(IMAGES / "bird.png")
    nchw = TensorSpec("x", (1, 3, 32, 48), np.dtype(np.float32))
    array, how = imageio.image_to_input(photo, nchw, "imagenet")
    assert array.shape == (1, 3, 32, 48) and array.dtype == np.float32 and "NCHW" in how
    gray = TensorSpec("x", (1, 28, 28), np.dtype(np.uint8))
    array, _ = imageio.image_to_input(photo, gray)
    assert array.shape == (1, 28, 28)


@pytest.mark.parametrize("data", [b"", b"\x89PNG\r\n\x1a\n", b"\x89PNG\r\n\x1a\n" + b"\0" * 64, b"GIF89a"])
def test_broken_images_are_input_errors(tmp_path, data):
    with pytest.raises(InputError):
        imageio.decode_png(data, "broken.png")


def test_non_image_tensor_is_refused():
    with pytest.raises(InputError, match="not an image"):
        imageio.layout_of(TensorSpec("x", (1, 10), np.dtype(np.float32)))
