"""The README's executor plug-in (tests/plugin_example), installed for real with pip from its own project
(setuptools, offline), is ranked and chosen like a built-in executor and passes the conformance suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS, ROOT
from edgeaccel.testing.plugins import activate, uninstall

EXAMPLE = ROOT / "tests" / "plugin_example"
MODEL = MODELS / "mobilenet_v2_1.0_224_quant.onnx"
pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: installs a plug-in and runs its suite


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """pip install --no-deps --no-build-isolation --no-index --target <tmp> of a copy of the project (pip builds
    in the source tree: the copy keeps build/ and *.egg-info out of this repository)."""
    work = tmp_path_factory.mktemp("plugin")
    source = shutil.copytree(EXAMPLE, work / "project")
    target = work / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(target), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "edgeaccel_example_plugin-0.1.0.dist-info" / "entry_points.txt").is_file()
    plugin = activate(target, "edgeaccel-example-plugin", "edgeaccel_example_plugin")
    yield plugin, source
    uninstall(plugin)


def test_the_installed_plugin_is_registered_with_its_version(installed):
    plugin, _ = installed
    cls = plugin.classes["example-npu"]
    assert cls.device_kinds == {"ExampleNPU": "npu"} and cls.installed() == "0.1.0"
    assert cls.availability("ExampleNPU")


def test_the_plugin_is_ranked_and_chosen_like_a_builtin(installed):
    with edgeaccel.load(MODEL) as model:
        assert model.executor.name == "example-npu:ExampleNPU"
        assert "tried before the CPU" in model.executor.reason, model.executor.reason
        x = np.random.default_rng(0).integers(0, 255, (1, 224, 224, 3), endpoint=True).astype(np.uint8)
        got = model.run(x)[0]
    with edgeaccel.load(MODEL, executor="onnxruntime", device="CPU") as cpu:
        np.testing.assert_array_equal(got, cpu.run(x)[0])


def test_the_plugin_passes_the_conformance_suite_in_its_own_project(installed):
    plugin, source = installed
    env = {**os.environ, "PYTHONPATH": plugin.pythonpath(ROOT), "EXAMPLE_MODEL": str(MODEL)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=source, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_the_readme_shows_the_example_as_it_is_tested():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Write an executor plug-in"):]
    section = section.split("\n## ", 1)[0] if "\n## " in section[1:] else section
    module = (EXAMPLE / "src" / "edgeaccel_example_plugin" / "__init__.py").read_text()
    pyproject = (EXAMPLE / "pyproject.toml").read_text()
    for text in (module[module.index("from __future__"):], pyproject[:pyproject.index("[tool.pytest")].rstrip(),
                 (EXAMPLE / "tests" / "test_conformance.py").read_text()):
        assert text in section, text[:200]
