"""Shared fixtures: the real models, images and video (tests/assets.py says where they come from), the CLI
runner, and the tiers (`pytest -m "not slow"` is the fast one; docs/development.md)."""

from __future__ import annotations

import atexit
import functools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import assets

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"  # the small real files the repository carries, with their licences
SAMPLES = ROOT / "edgeaccel" / "samples"
# the full set (larger models too), beside the checkout in CI; optional elsewhere
FULL_SET = Path(os.environ.get("EDGEACCEL_SHARED", ROOT.parent / "shared"))
SHARED = assets.overlay(DATA, SAMPLES, FULL_SET)  # one folder of links to all three, repository files first
atexit.register(assets.remove, SHARED)
MODELS = SHARED / "models"
IMAGES = SHARED / "images"
VIDEO = SHARED / "video"
# a plug-in's own project (README: Write an executor plug-in): its tests run once it is installed
# (test_plugin_example.py), not in this suite, where its package is not importable
collect_ignore = ["plugin_example"]


def needs(*rels: str):
    """Mark: skip unless these files (``"models/x.tflite"``) are there, naming them and where to put them."""
    return assets.needs(SHARED, FULL_SET, *rels)


@pytest.fixture(autouse=True, scope="session")
def _built_assets():
    """Files the repository does not carry but a test can make from one it does (the OpenVINO IR)."""
    assets.build_missing(SHARED)


def pytest_collection_modifyitems(config, items):
    """A test that starts the CLI (the ``cli`` fixture: a child process that imports the runtimes) is in the slow
    tier; the other slow tests are marked where they are written."""
    for item in items:
        if "cli" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that failed because a file of the full set is absent here is skipped, saying which file and where
    to put it: on a fresh clone the summary shows what was not tested, instead of a failure or nothing."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None:
        rel = assets.missing_asset(str(report.longrepr), SHARED)
        if rel is not None:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {assets.where_to_put(rel, FULL_SET)}")


def run_cli(*args, env: dict | None = None, timeout: float = 300, cwd: Path | None = None,
            ) -> subprocess.CompletedProcess:
    """``python -m edgeaccel ARGS`` in a child process that imports this checkout (PYTHONPATH first), with
    ``env`` over the test process's environment (a None value removes that variable). Output is captured as
    text; a hang ends at ``timeout``. The child inherits the suite's private cache and calibration setting."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get(
        "PYTHONPATH"))))}
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    return subprocess.run([sys.executable, "-m", "edgeaccel", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=environment, cwd=cwd)


@pytest.fixture
def cli(tmp_path):
    """The CLI runner, run in the test's own folder: whatever a command writes by default stays there."""
    return functools.partial(run_cli, cwd=tmp_path)


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


@pytest.fixture(scope="session")
def labels() -> list[str]:
    return (MODELS / "imagenet_labels.txt").read_text().splitlines()


def image_input(name: str, spec) -> np.ndarray:
    """An image from IMAGES fitted to an input spec the way `edgeaccel run` does it."""
    from edgeaccel.imageio import image_to_input, read_image

    array, _ = image_to_input(read_image(IMAGES / f"{name}.png"), spec)
    return array


def without(*devices: str):
    """Skip a test that asserts what this machine answers when it lacks ``devices`` (probe names: CUDA,
    EdgeTPU, NPU, GPU, TPU, QNN) on a machine that has one: its answer there is a different, valid one."""
    from edgeaccel import probe

    here = probe(runtimes=False).present_devices() & set(devices)
    return pytest.mark.skipif(bool(here), reason=f"this machine has {', '.join(sorted(here))}")
