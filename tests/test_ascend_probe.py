"""Huawei Ascend NPUs as the probe finds them, on fake device trees (edgeaccel.testing.atlas_200_dk and trees
built here): the driver's nodes, its version file, npu-smi, PCI ids, and the reason and fix when something is
missing or this user may not open the nodes. No Ascend hardware here: the README lists that as unverified."""

from __future__ import annotations

import pytest

import edgeaccel
from edgeaccel.hardware import Identity
from edgeaccel.hardware.npu_ascend import DRIVER_FIX, driver_version, parse_version_info, read_ascend_npu
from edgeaccel.hardware.schema import validate
from edgeaccel.profiles import load_profiles, match_profile
from edgeaccel.profiles.facts import facts_from_probe
from edgeaccel.testing import FakeTree, atlas_200_dk

STRANGER = Identity(uid=4242, gids=frozenset({4242}))


def family(report):
    return next(f for f in report.families if f.id == "ascend-npu")


def test_an_atlas_board_with_its_driver_is_usable_and_matches_its_profile(tmp_path):
    atlas_200_dk(tmp_path)
    report = edgeaccel.probe(tmp_path)
    (npu,) = [a for a in report.accelerators if a.kind == "ascend-npu"]
    assert npu.usable and npu.devices == ("CANN",) and npu.found_by == "/dev/davinci0"
    assert [n.path for n in npu.nodes] == ["/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    assert npu.details["driver_version"] == "23.0.0" and npu.details["npu_smi"] == "/usr/local/bin/npu-smi"
    assert "CANN" in report.present_devices() and family(report).status == "usable"
    assert validate(report.to_dict()) == []
    profile, reason = match_profile(facts_from_probe(report), load_profiles())
    assert profile.name == "atlas-310" and "CANN" in reason


def test_another_user_is_told_to_join_hwhiaiuser(tmp_path):
    atlas_200_dk(tmp_path)
    npu = read_ascend_npu(tmp_path, access=edgeaccel.hardware.access.Access(tmp_path, STRANGER)).accelerators[0]
    assert not npu.usable and npu.reason.startswith("this user cannot read and write /dev/davinci0 (group HwHiAiUser")
    assert npu.fix.startswith("add the user to group 'HwHiAiUser': sudo usermod -aG HwHiAiUser $USER")


def test_nodes_only_root_may_open_get_the_documented_group_fix(tmp_path):
    atlas_200_dk(tmp_path, group_access=False)  # mode 0600: joining the owning group would not help
    npu = read_ascend_npu(tmp_path, access=edgeaccel.hardware.access.Access(tmp_path, STRANGER)).accelerators[0]
    assert not npu.usable and "mode 0600" in npu.reason
    assert npu.fix.startswith("add the user to group HwHiAiUser (the group the Ascend driver gives its nodes)")


def test_a_missing_driver_node_is_named_with_the_driver_fix(tmp_path):
    atlas_200_dk(tmp_path)
    (tmp_path / "dev" / "devmm_svm").unlink()
    npu = read_ascend_npu(tmp_path).accelerators[0]
    assert not npu.usable and npu.present
    assert npu.reason == "/dev/davinci0 is there but the driver's /dev/devmm_svm is missing" and npu.fix == DRIVER_FIX


def test_a_card_on_pci_without_the_driver(tmp_path):
    tree = FakeTree(tmp_path)
    tree.pci_device("0000:01:00.0", 0x19E5, 0xD100, 0x120000)  # Ascend 310 (Atlas 300I), no driver bound
    tree.file("/usr/local/Ascend/driver/version.info", "Version=24.1.rc1\n").dir("/dev")
    report = edgeaccel.probe(tmp_path)
    (npu,) = [a for a in report.accelerators if a.kind == "ascend-npu"]
    assert npu.name == "Huawei Ascend 310 at 0000:01:00.0" and not npu.present and not npu.usable
    assert npu.reason == ("an Ascend 310 is on the PCI bus but there is no /dev/davinciN (no driver bound; the driver "
                          "package is installed (version 24.1.rc1) but made no node)")
    assert npu.fix == DRIVER_FIX and family(report).status == "no-driver"


def test_nothing_ascend_says_what_was_looked_for(tmp_path):
    FakeTree(tmp_path).dir("/dev").dir("/proc")
    report = edgeaccel.probe(tmp_path)
    got = family(report)
    assert got.status == "absent" and got.devices == ("CANN",)
    assert got.reason == ("no /dev/davinciN node, /usr/local/Ascend/driver/version.info is missing, and no Huawei "
                          "Ascend device (no PCI devices are listed in /sys/bus/pci/devices)")
    assert any("davinci_manager" in s for s in got.looked_for) and any("0xd100" in s for s in got.looked_for)


@pytest.mark.parametrize("text, expected", [
    ("Version=24.1.rc1\nascendhal_version=7.35.19\nInnerversion=V100R001C15SPC006B220\n", "24.1.rc1"),
    ("package_version=23.0.0\n\nnot a key value line\n", "23.0.0"),
    ("", None),
])
def test_the_driver_version_file(text, expected):
    assert driver_version(parse_version_info(text)) == expected
