"""PNGs beyond 8-bit RGB: 16-bit grey and colour, grey+alpha, palette and 1/2/4-bit images decode to the same
8-bit pixels through edgeaccel's own PNG decoder and through Pillow, or are refused clearly. The PNGs are
written here with numpy and zlib, so every bit depth and colour type the PNG spec allows is covered (Pillow
cannot write 16-bit colour)."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from edgeaccel import imageio
from edgeaccel.errors import InputError

H, W = 9, 13  # odd sizes: sub-byte rows end mid-byte


def png_bytes(samples: np.ndarray, color: int, depth: int, palette: np.ndarray | None = None,
              filter_type: int = 0) -> bytes:
    """A non-interlaced PNG of ``samples`` (H, W, channels) in colour type ``color`` at ``depth`` bits."""
    height, width = samples.shape[:2]
    if depth == 16:
        rows = samples.astype(">u2").reshape(height, -1).view(np.uint8)
    elif depth == 8:
        rows = samples.astype(np.uint8).reshape(height, -1)
    else:  # 1, 2, 4 bits, one channel: packed big-endian within a byte
        bits = ((samples[..., 0, None] >> np.arange(depth - 1, -1, -1)) & 1).astype(np.uint8)
        rows = np.packbits(bits.reshape(height, -1), axis=1, bitorder="big")
    raw = b"".join(bytes([filter_type]) + _filtered(row, prev, filter_type, depth, samples.shape[2])
                   for row, prev in zip(rows, [np.zeros_like(rows[0]), *rows[:-1]], strict=True))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, 0))
    if palette is not None:
        out += chunk(b"PLTE", palette.astype(np.uint8).tobytes())
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def _filtered(row: np.ndarray, prev: np.ndarray, kind: int, depth: int, channels: int) -> bytes:
    if kind == 0:
        return row.tobytes()
    if kind == 2:  # Up
        return (row - prev).astype(np.uint8).tobytes()
    bpp = max(1, depth * channels // 8)  # Sub
    left = np.concatenate([np.zeros(bpp, np.uint8), row[:-bpp]])
    return (row - left).astype(np.uint8).tobytes()


def both(tmp_path, data: bytes, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(own decoder, Pillow path) for the same file."""
    path = tmp_path / name
    path.write_bytes(data)
    return imageio.decode_png(data, name), imageio.read_image(path)


rng = np.random.default_rng(29)


@pytest.mark.parametrize("filter_type", [0, 1, 2])
def test_16_bit_grey_is_scaled_not_clipped(tmp_path, filter_type):
    grey = np.linspace(0, 65535, H * W).astype(np.uint16).reshape(H, W, 1)
    ours, pillow = both(tmp_path, png_bytes(grey, 0, 16, filter_type=filter_type), "g16.png")
    expected = (grey >> 8).astype(np.uint8)
    for got in (ours, pillow):
        assert got.dtype == np.uint8 and got.shape == (H, W, 1)
        np.testing.assert_array_equal(got, expected)
    assert (pillow == 255).mean() < 0.05  # was 99.6 % white: Pillow's convert("L") clips I;16 at 255


@pytest.mark.parametrize("color, channels", [(2, 3), (6, 4), (4, 2)])
def test_16_bit_colour_and_alpha_agree_between_decoders(tmp_path, color, channels):
    samples = rng.integers(0, 65536, (H, W, channels), dtype=np.uint32).astype(np.uint16)
    ours, pillow = both(tmp_path, png_bytes(samples, color, 16, filter_type=1), "c16.png")
    colour = samples[..., : 3 if channels >= 3 else 1]
    expected = (colour >> 8).astype(np.uint8)
    np.testing.assert_array_equal(ours, expected)
    # Pillow reads 16-bit grey+alpha as RGBA: the same grey in three channels
    np.testing.assert_array_equal(pillow, np.repeat(expected, 3 // expected.shape[2], axis=2))


@pytest.mark.parametrize("depth", [1, 2, 4, 8])
def test_palette_images_become_their_colours(tmp_path, depth):
    colours = rng.integers(0, 256, (1 << depth, 3), dtype=np.uint8)
    index = rng.integers(0, 1 << depth, (H, W, 1), dtype=np.uint8)
    ours, pillow = both(tmp_path, png_bytes(index, 3, depth, palette=colours), "p.png")
    for got in (ours, pillow):
        assert got.shape == (H, W, 3)
        np.testing.assert_array_equal(got, colours[index[..., 0]])


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_low_bit_grey_spans_0_to_255(tmp_path, depth):
    levels = rng.integers(0, 1 << depth, (H, W, 1), dtype=np.uint8)
    ours, pillow = both(tmp_path, png_bytes(levels, 0, depth), "g.png")
    expected = (levels.astype(np.int32) * 255 // ((1 << depth) - 1)).astype(np.uint8)
    for got in (ours, pillow):
        np.testing.assert_array_equal(got, expected)
    assert set(np.unique(ours)) <= {0, 255} if depth == 1 else True


def test_pillow_1_bit_and_grey_alpha_images(tmp_path):
    bw = tmp_path / "bw.png"
    Image.fromarray(np.eye(8, dtype=bool)).save(bw)  # Pillow writes mode "1"
    got = imageio.read_image(bw)
    assert got.dtype == np.uint8 and set(np.unique(got)) == {0, 255}  # was bool: 0/1, a black image
    la = tmp_path / "la.png"
    grey = rng.integers(0, 256, (H, W), dtype=np.uint8)
    Image.fromarray(np.dstack([grey, np.full_like(grey, 7)]), "LA").save(la)
    np.testing.assert_array_equal(imageio.read_image(la)[..., 0], grey)


def test_palette_with_transparency_through_pillow(tmp_path):
    path = tmp_path / "pt.png"
    image = Image.fromarray(rng.integers(0, 4, (H, W), dtype=np.uint8), "P")
    image.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9])
    image.info["transparency"] = 3
    image.save(path, transparency=3)
    got = imageio.read_image(path)
    own = imageio.decode_png(path.read_bytes(), "pt.png")
    np.testing.assert_array_equal(got, own)


def test_16_bit_grey_reaches_the_vision_layer_unclipped(tmp_path):
    from edgeaccel.vision.preprocess import as_rgb

    grey = np.linspace(0, 65535, H * W).astype(np.uint16).reshape(H, W)
    path = tmp_path / "g16.png"
    Image.fromarray(grey).save(path)  # Pillow writes I;16
    rgb = as_rgb(path)
    np.testing.assert_array_equal(rgb[..., 1], (grey >> 8).astype(np.uint8))


def test_palette_index_past_the_palette_is_refused():
    index = np.full((H, W, 1), 5, np.uint8)
    with pytest.raises(InputError, match="palette index 5 past its 4 colours"):
        imageio.decode_png(png_bytes(index, 3, 8, palette=np.zeros((4, 3))), "bad.png")


def test_float_and_32_bit_images_are_refused(tmp_path):
    path = tmp_path / "f.tif"
    Image.fromarray(np.ones((4, 4), np.float32)).save(path)
    with pytest.raises(InputError, match="floating point") as caught:
        imageio.read_image(path)
    assert "8- or 16-bit" in caught.value.hint
    wide = tmp_path / "i.tif"
    Image.fromarray(np.full((4, 4), 1 << 20, np.int32)).save(wide)
    with pytest.raises(InputError, match="range is unknown"):
        imageio.read_image(wide)


def test_16_bit_arrays_and_pil_images_given_to_the_vision_layer(tmp_path):
    from edgeaccel.vision.preprocess import as_rgb

    grey = np.linspace(0, 65535, H * W).astype(np.uint16).reshape(H, W)
    np.testing.assert_array_equal(as_rgb(Image.fromarray(grey))[..., 0], (grey >> 8).astype(np.uint8))
    with pytest.raises(InputError, match="past 8 bits") as caught:
        as_rgb(grey)  # was clipped to an all-white image
    assert "image >> 8" in caught.value.hint
    small = np.arange(H * W, dtype=np.uint16).reshape(H, W) % 256  # integers already in 0..255 are pixels
    np.testing.assert_array_equal(as_rgb(small)[..., 0], small.astype(np.uint8))


@pytest.mark.parametrize("orientation, turn", [(1, None), (3, Image.Transpose.ROTATE_180),
                                               (6, Image.Transpose.ROTATE_270), (8, Image.Transpose.ROTATE_90)])
def test_a_photos_exif_orientation_is_applied_so_its_pixels_come_upright(tmp_path, orientation, turn):
    """A phone stores a portrait photo sideways and tags it; a viewer, a browser and ``edgeaccel serve`` show
    it turned, and so does read_image (decode_image too), or a detector's boxes land on a sideways picture."""
    stored = np.zeros((20, 40, 3), np.uint8)
    stored[:, :10] = 255  # a white band on the left: where it ends up says which way the image was turned
    image = Image.fromarray(stored)
    exif = image.getexif()
    exif[0x0112] = orientation
    path = tmp_path / "photo.jpg"
    image.save(path, quality=95, exif=exif)
    want = np.asarray(Image.fromarray(stored) if turn is None else Image.fromarray(stored).transpose(turn))
    got = imageio.read_image(path)
    assert got.shape == want.shape
    assert np.abs(got.astype(int) - want).mean() < 3  # JPEG's loss, not a turn
    np.testing.assert_array_equal(imageio.decode_image(path.read_bytes()), got)
    from edgeaccel.evaluation.dataset import image_size

    assert image_size(path) == (got.shape[1], got.shape[0])  # what a dataset's normalized labels are scaled by
    from PIL import ImageOps

    from edgeaccel.vision.preprocess import as_rgb

    with Image.open(path) as opened:  # a PIL image is turned as its file is, and one already turned is not again
        np.testing.assert_array_equal(as_rgb(opened), got)
        np.testing.assert_array_equal(as_rgb(ImageOps.exif_transpose(opened)), got)
        if turn is not None:  # turned by hand (rotate/transpose keep the tag): taken as the caller made it
            by_hand = opened.transpose(turn)
            assert by_hand.getexif().get(0x0112) == orientation
            np.testing.assert_array_equal(as_rgb(by_hand), np.asarray(by_hand.convert("RGB")))
            assert as_rgb(by_hand).shape == got.shape
