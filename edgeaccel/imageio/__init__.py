"""Images in, model-shaped arrays out: ``decode`` (image files to pixels, with or without Pillow), ``resizing``
(Pillow's antialiased resize, edgeaccel's own; stretch or letterbox to an input size) and ``inputs`` (channel
order, size, layout and type for a model's input). Every name is importable from ``edgeaccel.imageio``.
"""

from __future__ import annotations

from .decode import decode_image, decode_png, read_image, to_8bit
from .inputs import DYNAMIC_SIZE_HINT, NORMALIZATIONS, image_input, image_to_input, layout_of
from .resizing import LETTERBOX_FILL, Frame, fit, resize

__all__ = ["DYNAMIC_SIZE_HINT", "LETTERBOX_FILL", "NORMALIZATIONS", "Frame", "decode_image", "decode_png", "fit",
           "image_input", "image_to_input", "layout_of", "read_image", "resize", "to_8bit"]
