"""edgeaccel.devfs: one escape rule and one set of failure words for every reader of device files, and one fake
writer with one unit convention (degrees C in, the kernel's millidegrees on disk). Real files, no mocks."""

from __future__ import annotations

import os

import pytest

import edgeaccel
from edgeaccel.devfs import Tree, children, confined, exists, is_dir, words
from edgeaccel.devfs.fake import DeviceFiles
from edgeaccel.sim.fakesys import FakeSysfs
from edgeaccel.telemetry import sysfs, thermal
from edgeaccel.telemetry.inventory import read_inventory
from edgeaccel.testing import FakeTree


@pytest.fixture
def escaping_root(tmp_path):
    """A device image whose thermal zone folder is an absolute symlink to a folder of this machine, beside it."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "temp").write_text("42000\n")
    (host / "type").write_text("host-zone\n")
    root = tmp_path / "image"
    DeviceFiles(root).dir("/sys/class/thermal")
    os.symlink(host, root / "sys/class/thermal/thermal_zone0")
    return root


# The device paths that lead out of the root: through the symlink, and up through ".." with no link at all.
ESCAPES = ["/sys/class/thermal/thermal_zone0/temp", "/../host/temp"]


@pytest.mark.parametrize("target", ESCAPES)
def test_every_reader_refuses_a_path_out_of_the_root_in_the_same_words(escaping_root, target):
    tree = Tree(escaping_root)
    local = tree.path(target)
    assert local.exists()  # the file is there on this machine: only the rule keeps it out
    folder = target.rsplit("/", 1)[0]

    assert tree.read(target).text is None and tree.read(target).reason == words.OUTSIDE_ROOT
    assert tree.listdir(folder) == ([], f"{folder} {words.OUTSIDE_ROOT}")
    assert not tree.exists(target) and not tree.is_dir(folder)
    with confined(escaping_root):  # the telemetry readers' path-based side, confined as an inventory is
        assert sysfs.read_text(local) == (None, f"{local} {words.OUTSIDE_ROOT}")
        assert sysfs.read_int(local)[0] is None and children(local.parent, "*") == []
        assert not exists(local) and not is_dir(local.parent)
    # outside any confinement (this machine's own "/"), the same path reads: the rule is the root, not the path
    assert sysfs.read_text(local) == ("42000", None)


def test_the_probe_and_the_telemetry_inventory_both_refuse_the_escaping_zone(escaping_root):
    (zone,) = read_inventory(escaping_root).zones
    assert zone.temperature.value is None and words.OUTSIDE_ROOT in zone.temperature.reason
    (surveyed,) = edgeaccel.probe(root=escaping_root).telemetry.to_dict()["thermal_zones"]
    assert not surveyed["readable"] and words.OUTSIDE_ROOT in surveyed["reason"]


def test_a_missing_file_is_worded_alike_by_the_probe_and_the_telemetry(tmp_path):
    DeviceFiles(tmp_path).thermal_zone(0, "cpu-thermal", 50.0).path("/sys/class/thermal/thermal_zone0/temp").unlink()
    assert Tree(tmp_path).read("/sys/class/thermal/thermal_zone0/temp").reason == words.MISSING
    assert thermal.read_thermal_zones(tmp_path)[0].temperature.reason.endswith(f"/temp {words.MISSING}")


def test_temperatures_go_in_as_degrees_and_are_written_in_millidegrees(tmp_path):
    files = DeviceFiles(tmp_path).thermal_zone(0, "cpu-thermal", 51.65, [("passive", 85.0, 2.0), ("critical", 110)])
    zone = files.path("/sys/class/thermal/thermal_zone0")
    assert (zone / "temp").read_text() == "51650\n"
    assert [(zone / f"trip_point_{k}_{part}").read_text() for k, part in ((0, "temp"), (0, "hyst"), (1, "temp"))] \
        == ["85000\n", "2000\n", "110000\n"]
    (read,) = thermal.read_thermal_zones(tmp_path)
    assert read.temperature.value == pytest.approx(51.65) and read.passive_c == pytest.approx(85.0)
    (surveyed,) = edgeaccel.probe(root=tmp_path).telemetry.to_dict()["thermal_zones"]
    assert surveyed["readable"] and [t["temp_c"] for t in surveyed["trip_points"]] == pytest.approx([85.0, 110.0])


@pytest.mark.parametrize("call", [
    lambda f: f.thermal_zone(0, "cpu-thermal", 51650),
    lambda f: f.thermal_zone(0, "cpu-thermal", 50.0, [("critical", 110000)]),
    lambda f: f.zone_temp(0, -300.0),
    lambda f: f.apex(0, 43050),
])
def test_a_millidegree_value_passed_as_degrees_is_refused_not_written(tmp_path, call):
    with pytest.raises(ValueError, match="degrees Celsius"):
        call(DeviceFiles(tmp_path))
    assert not DeviceFiles(tmp_path).path("/sys/class/thermal/thermal_zone0/temp").exists()


def test_the_earlier_names_are_the_one_writer_and_write_the_same_files(tmp_path):
    assert FakeSysfs is DeviceFiles and issubclass(FakeTree, DeviceFiles)
    FakeTree(tmp_path / "old").thermal_zone(0, "x86_pkg_temp", 61500, [("passive", 95000)])  # millidegrees, as ever
    DeviceFiles(tmp_path / "new").thermal_zone(0, "x86_pkg_temp", 61.5, [("passive", 95.0)])
    old, new = (sorted((p.relative_to(tmp_path / side), p.read_bytes()) for p in (tmp_path / side).rglob("*")
                       if p.is_file()) for side in ("old", "new"))
    assert old == new and (b"61500\n" in dict(old).values())


def test_a_sysfs_attribute_is_rewritten_atomically_and_only_when_it_changes(tmp_path):
    files = DeviceFiles(tmp_path)
    temp = files.write("/sys/class/thermal/thermal_zone0/temp", 40000)
    before = temp.stat().st_ino
    files.write("/sys/class/thermal/thermal_zone0/temp", 40000)
    assert temp.stat().st_ino == before  # unchanged value: not written again
    files.write("/sys/class/thermal/thermal_zone0/temp", 41000)
    assert temp.read_text() == "41000\n" and not list(temp.parent.glob(".*tmp*"))


def test_the_readers_old_homes_still_answer():
    """Code that imported the probe's Tree or the telemetry's helpers keeps working: the same objects."""
    from edgeaccel.devfs import natural_key
    from edgeaccel.probe import fs as probe_fs

    assert probe_fs.Tree is Tree and probe_fs.natural_key is natural_key and sysfs.natural_key is natural_key
    assert sysfs.confined is confined and sorted(["zone10", "zone2"], key=natural_key) == ["zone2", "zone10"]
