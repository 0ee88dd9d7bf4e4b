"""Shared fixtures: the real models and images in ../shared (see ../shared/README.md)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared"))
MODELS = SHARED / "models"
IMAGES = SHARED / "images"
SAMPLES = ROOT / "edgeaccel" / "samples"
# a plug-in's own project (README: Write an executor plug-in): its tests run once it is installed
# (test_plugin_example.py), not in this suite, where its package is not importable
collect_ignore = ["plugin_example"]


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Every test run gets its own cache: measurements a user made with `edgeaccel tune` must not change
    which executor a test gets, nor may the tests leave files in the user's cache."""
    folder = tmp_path_factory.mktemp("edgeaccel-cache")
    old = os.environ.get("EDGEACCEL_CACHE_DIR")
    os.environ["EDGEACCEL_CACHE_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("EDGEACCEL_CACHE_DIR", None)
    else:
        os.environ["EDGEACCEL_CACHE_DIR"] = old


@pytest.fixture(autouse=True, scope="session")
def _no_background_calibration():
    """Background calibration (load's default) measures in a thread and may switch executors while a test
    looks: off for the suite, on where a test asks for it (calibrate="background", tests/test_background.py).
    Subprocesses (CLI tests) inherit it."""
    old = os.environ.get("EDGEACCEL_CALIBRATE")
    os.environ["EDGEACCEL_CALIBRATE"] = "off"
    yield
    if old is None:
        os.environ.pop("EDGEACCEL_CALIBRATE", None)
    else:
        os.environ["EDGEACCEL_CALIBRATE"] = old


def pytest_collection_modifyitems(config, items):
    if not MODELS.is_dir():
        skip = pytest.mark.skip(reason=f"shared models not found at {MODELS} (set EDGEACCEL_SHARED)")
        for item in items:
            if "shared" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def labels() -> list[str]:
    return (MODELS / "imagenet_labels.txt").read_text().splitlines()


def image_input(name: str, spec) -> np.ndarray:
    """An image from ../shared/images fitted to an input spec the way `edgeaccel run` does it."""
    from edgeaccel.imageio import image_to_input, read_image

    array, _ = image_to_input(read_image(IMAGES / f"{name}.png"), spec)
    return array


def without(*devices: str):
    """Skip a test that asserts what this machine answers when it lacks ``devices`` (probe names: CUDA,
    EdgeTPU, NPU, GPU, TPU, QNN) on a machine that has one: its answer there is a different, valid one."""
    from edgeaccel import probe

    here = probe(runtimes=False).present_devices() & set(devices)
    return pytest.mark.skipif(bool(here), reason=f"this machine has {', '.join(sorted(here))}")
