"""Where the tests' real models, images and video come from, so that a fresh clone runs what CI runs.

Three sources, first one wins for each file: ``tests/data/{models,images,video}`` (the small real files, in the
repository with their licences: tests/data/README.md), ``edgeaccel/samples`` (the bundled sample) and the full
set beside the checkout (``../shared``, or ``$EDGEACCEL_SHARED``), which holds the larger models too. The tests
see one folder: ``overlay()`` links every file of the three into a temporary ``models/``, ``images/`` and
``video/``, so a test names a file the same way wherever it comes from.

A test that needs a file only the full set has, on a machine without it, is skipped with a reason that names the
file and says where to put it (``missing_asset`` finds it in the test's failure); nothing else turns into a skip.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest

KINDS = ("models", "images", "video")
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp"}

# The files of the full set that the repository does not carry (too large for its budget: tests/data/README.md).
# The IR is built from the ONNX model when it is missing (build_missing); it is listed in case OpenVINO is not
# installed to build it.
SHARED_ONLY = frozenset({
    "models/movenet_single_pose_lightning_ptq.tflite",
    "models/movenet_single_pose_lightning_ptq_edgetpu.tflite",
    "models/deeplabv3_mnv2_dm05_pascal_quant_edgetpu.tflite",
    "models/tf2_mobilenet_v2_1.0_224_ptq.tflite",
    "models/openvino/mobilenet_v2_1.0_224_quant.xml",
    "models/openvino/mobilenet_v2_1.0_224_quant.bin",
})
IR = "models/openvino/mobilenet_v2_1.0_224_quant.xml"
IR_SOURCE = "models/mobilenet_v2_1.0_224_quant.onnx"


def _link_tree(source: Path, into: Path) -> None:
    if not source.is_dir():
        return
    for path in sorted(source.rglob("*")):
        target = into / path.relative_to(source)
        if path.is_file() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path.resolve())


def overlay(data: Path, samples: Path, shared: Path) -> Path:
    """A temporary folder whose models/, images/ and video/ link every file of the three sources, first source
    first. Removed by ``remove``; links only, so it costs nothing to make."""
    root = Path(tempfile.mkdtemp(prefix="edgeaccel-test-assets-"))
    for kind in KINDS:
        (root / kind).mkdir()
        _link_tree(data / kind, root / kind)
    if samples.is_dir():  # the bundled sample is one flat folder: its photo is an image, the rest model files
        for path in sorted(samples.iterdir()):
            kind = "images" if path.suffix.lower() in IMAGE_SUFFIXES else "models"
            if path.is_file() and path.name != "README.md" and not (root / kind / path.name).exists():
                (root / kind / path.name).symlink_to(path.resolve())
    for kind in KINDS:
        _link_tree(shared / kind, root / kind)
    return root


def remove(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)


def build_missing(root: Path) -> None:
    """The OpenVINO IR of the MobileNetV2 ONNX model, saved the way the full set's copy was (``save_model``),
    when no source has it and OpenVINO is installed."""
    ir, onnx_model = root / IR, root / IR_SOURCE
    if ir.exists() or not onnx_model.exists():
        return
    try:
        import openvino as ov
    except ImportError:
        return
    ir.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov.convert_model(str(onnx_model)), str(ir))


def where_to_put(rel: str, shared: Path) -> str:
    return (f"needs {rel} from the full test data set, which is not in the repository (too large): put the "
            f"shared folder at {shared} or point $EDGEACCEL_SHARED at a folder with models/, images/ and video/")


def missing_asset(text: str, root: Path) -> str | None:
    """The first file of SHARED_ONLY that ``text`` (a failure) names under ``root`` and that no source had."""
    for match in re.finditer(re.escape(str(root)) + r"/((?:models|images|video)/[\w./-]+)", text):
        rel = match.group(1).rstrip(".")
        if rel in SHARED_ONLY and not (root / rel).exists():
            return rel
    return None


def needs(root: Path, shared: Path, *rels: str):
    """Skip unless every file (``"models/x.tflite"``) is there, saying which and where to put it."""
    absent = [rel for rel in rels if not (root / rel).exists()]
    return pytest.mark.skipif(bool(absent), reason=where_to_put(", ".join(absent), shared) if absent else "")
