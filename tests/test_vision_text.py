"""Result text without glitches: "1 box" (not "1 boxes"), a label and its score drawn apart ("FACE 0.79", which
Pillow's default font at 10 px drew as "FACE0.79"), and box labels kept inside the frame when the box touches
its top, left or right edge."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PIL")

from edgeaccel.cli import vision_view  # noqa: E402
from edgeaccel.vision.overlay import label_origin  # noqa: E402
from edgeaccel.vision.preprocess import Frame  # noqa: E402
from edgeaccel.vision.results import Box, Classification, ClassifyResult, DetectResult  # noqa: E402
from edgeaccel.wording import counted  # noqa: E402

H, W = 240, 320


def detect(*boxes: Box) -> DetectResult:
    return DetectResult("detect", Frame(W, H, W, H, 1.0, 1.0), boxes=list(boxes))


def text_mask(image: np.ndarray) -> np.ndarray:
    """The label's text: white (anti-aliased) on the box colour (class 0: dark red) over a black image."""
    return (image[..., 1] > 100) & (image[..., 2] > 100)


def white_pixels(image: np.ndarray) -> int:
    return int(text_mask(image).sum())


@pytest.mark.parametrize("xyxy", [(0, 0, 40, 50), (W - 30, 0, W, 60), (0, 90, 25, 140), (W - 20, 100, W, 150),
                                  (140, H - 8, 200, H)])
def test_a_label_at_the_frame_edge_is_drawn_whole(xyxy):
    """The same label, at the edge and in the middle of the frame, has as many text pixels: none cut off."""
    blank = np.zeros((H, W, 3), np.uint8)
    label = "pickup_suv_van"
    middle = white_pixels(detect(Box((140, 100, 180, 140), 0.79, 0, label)).render(blank))
    edge = white_pixels(detect(Box(xyxy, 0.79, 0, label)).render(blank))
    assert middle > 50 and edge == pytest.approx(middle, rel=0.05)


def test_label_origin_inside_the_frame():
    size = (120, 12)
    assert label_origin((50, 80, 90, 120), size, (H, W)) == (52, 80 - 12 - 2)  # above the box, on its edge
    x, y = label_origin((10, 0, 60, 40), size, (H, W))  # touches the top: inside the box, under its edge
    assert y >= 0 and 0 < y < 40
    x, y = label_origin((W - 10, 50, W, 90), size, (H, W))  # touches the right: moved left, whole
    assert x + size[0] <= W and x >= 0
    x, y = label_origin((0, 0, W, H), (W + 50, 12), (H, W))  # wider than the frame: starts at its left edge
    assert x >= 0


def gaps_in_label(image: np.ndarray, rows: slice) -> list[int]:
    """Widths of the runs of text-free columns between the first and last text column in ``rows``."""
    text = text_mask(image[rows]).any(axis=0)
    columns = np.flatnonzero(text)
    steps = np.diff(columns) - 1
    return [int(s) for s in steps if s > 0]


def test_label_and_score_are_drawn_apart():
    blank = np.zeros((H, W, 3), np.uint8)
    image = detect(Box((100, 100, 200, 200), 0.79, 0, "FACE")).render(blank)
    gaps = gaps_in_label(image, slice(70, 100))  # the label above the box
    # the widest gap (between "FACE" and "0.79") is wide and wider than any gap within the words
    assert max(gaps) >= 5 and sorted(gaps)[-1] > sorted(gaps)[-2] + 1
    listed = ClassifyResult("classify", Frame(W, H, W, H, 1.0, 1.0),
                            classes=[Classification(3, "FACE", 0.79)]).render(blank)
    gaps = gaps_in_label(listed, slice(0, 20))
    assert max(gaps) >= 5 and sorted(gaps)[-1] > sorted(gaps)[-2] + 1


def test_counts_in_text_output(capsys):
    assert counted(1, "box") == "1 box" and counted(0, "box") == "0 boxes" and counted(2, "frame") == "2 frames"
    vision = {"task": "detect", "recognized": "test", "decoder": "ssd-postprocess",
              "boxes": [{"xyxy": [1.0, 2.0, 3.0, 4.0], "score": 0.79, "class_id": 0, "label": "FACE"}]}
    vision_view.print_result(vision)
    out = capsys.readouterr().out
    assert "1 box (ssd-postprocess)" in out and "1 boxes" not in out
    assert "0.790  FACE " in out  # label and score apart
    vision_view.print_result({**vision, "boxes": []})
    out = capsys.readouterr().out
    assert "0 boxes (ssd-postprocess)" in out and "x1 y1" not in out
