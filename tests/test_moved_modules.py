"""Modules that moved into a package keep working at their old path for a release, with a DeprecationWarning that
names the new one."""

from __future__ import annotations

import importlib
import sys

import pytest

# old path -> new home (the alias is the very module object, so monkeypatching through either path is the same)
MOVED = {
    **{f"edgeaccel.{name}": f"edgeaccel.selection.{name}" for name in (
        "selector", "calibration", "timing", "background", "guard", "failed_artifacts", "inventory")},
    "edgeaccel.bundle": "edgeaccel.modelfiles.bundle",
    "edgeaccel.vision.labels": "edgeaccel.modelfiles.labels",
    "edgeaccel.vision.metadata": "edgeaccel.modelfiles.metadata",
    "edgeaccel.vision.check": "edgeaccel.agreement.check",
}


def fresh_import(name: str):
    sys.modules.pop(name, None)
    return importlib.import_module(name)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_warns_and_is_the_new_module(old):
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        alias = fresh_import(old)
    assert alias is importlib.import_module(MOVED[old])


def test_the_old_cache_module_finds_names_in_both_halves_of_its_split():
    with pytest.warns(DeprecationWarning, match=r"edgeaccel\.cachedir"):
        cache = fresh_import("edgeaccel.cache")
    from edgeaccel import cachedir
    from edgeaccel.selection import cache as calibration_cache

    assert cache.cache_root is cachedir.cache_root and cache.trim is cachedir.trim
    assert cache.CalibrationCache is calibration_cache.CalibrationCache
    with pytest.raises(AttributeError, match="no_such_name"):
        cache.no_such_name  # noqa: B018


def test_the_old_model_pipeline_module_finds_names_in_both_halves_of_its_split():
    with pytest.warns(DeprecationWarning, match=r"edgeaccel\.modelfiles\.describe"):
        old = fresh_import("edgeaccel.model_pipeline")
    from edgeaccel.modelfiles import describe, pipeline

    assert old.ModelPipeline is pipeline.ModelPipeline and old.describe_pipeline is describe.describe_pipeline


def test_names_import_from_an_old_path_and_the_warning_points_at_the_importer():
    sys.modules.pop("edgeaccel.calibration", None)
    with pytest.warns(DeprecationWarning) as caught:
        from edgeaccel.calibration import sample_inputs
    from edgeaccel.selection.calibration import sample_inputs as moved

    assert sample_inputs is moved
    assert caught[0].filename == __file__


def test_a_name_that_never_existed_is_still_a_module_not_found_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("edgeaccel.no_such_module")


def test_the_survey_package_moved_and_edgeaccel_probe_stays_callable():
    import edgeaccel

    sys.modules.pop("edgeaccel.probe.fs", None)
    with pytest.warns(DeprecationWarning, match=r"edgeaccel\.hardware\.fs"):
        from edgeaccel.probe.fs import Tree
    assert Tree is importlib.import_module("edgeaccel.hardware.fs").Tree
    assert callable(edgeaccel.probe) and edgeaccel.probe.Identity is importlib.import_module("edgeaccel.hardware").Identity
    from edgeaccel.probe import probe  # the package once held the function of the same name

    assert probe is edgeaccel.probe
    with pytest.raises(AttributeError, match="no_such_name"):
        edgeaccel.probe.no_such_name  # noqa: B018
