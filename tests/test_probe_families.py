"""Every accelerator family the probe looks for is reported, found or not, with what it looked at and why it
is absent: on the board fixtures (real readers on fake trees), on an empty tree, in the JSON, in the text
of `edgeaccel probe`, and with the plug-ins the registry hands in."""

from __future__ import annotations

import json

import pytest

import edgeaccel
from edgeaccel.cli.probe_cmd import render
from edgeaccel.hardware import Identity
from edgeaccel.hardware.families import FAMILIES, PluginSeen, family_of
from edgeaccel.hardware.schema import validate
from edgeaccel.testing import BOARDS, FakeTree, rpi5_with_coral_usb, x86_with_coral_m2

STRANGER = Identity(uid=4242, gids=frozenset({4242}))
HARDWARE = [spec.id for spec in FAMILIES if spec.id != "plugins"]
# The families the issue names, each one looked for on every survey.
NAMED = {"cuda-gpu", "edgetpu-usb", "edgetpu-pcie", "intel-npu", "rockchip-npu", "hailo", "qualcomm-npu", "ascend-npu",
         "cloud-tpu", "intel-gpu", "jetson", "plugins"}


def families(report) -> dict:
    return {f.id: f for f in report.families}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_family_is_reported_on_every_board_and_agrees_with_the_accelerators(tmp_path, name):
    BOARDS[name](tmp_path)
    report = edgeaccel.probe(tmp_path)
    assert [f.id for f in report.families] == [spec.id for spec in FAMILIES] and set(families(report)) == NAMED
    found = {}
    for acc in report.accelerators:
        found.setdefault(family_of(acc), []).append(acc.name)
    assert found, f"the {name} fixture has an accelerator"
    for family in report.families:
        if family.id == "plugins":
            assert family.status == "not-checked"
            continue
        assert family.looked_for and family.reason, family
        assert list(family.found) == found.get(family.id, []), family
        assert (family.status == "absent") == (family.id not in found), family
    assert validate(report.to_dict()) == []


def test_an_empty_tree_says_what_was_looked_for_and_why_each_is_absent(tmp_path):
    FakeTree(tmp_path).dir("/proc").dir("/dev")
    report = edgeaccel.probe(tmp_path)
    assert report.accelerators == ()
    got = families(report)
    assert all(got[f].status == "absent" for f in HARDWARE)
    assert got["cuda-gpu"].reason.startswith("the nvidia driver is not loaded (/proc/driver/nvidia/version is missing)")
    assert "no PCI devices are listed in /sys/bus/pci/devices" in got["cuda-gpu"].reason
    assert got["edgetpu-usb"].reason.startswith("/sys/bus/usb/devices is missing; libedgetpu.so.1 is not on the "
                                                "loader path either")
    assert got["edgetpu-pcie"].reason.startswith("no apex driver (/sys/class/apex is missing)")
    assert "/sys/class/accel is missing" in got["intel-npu"].reason
    assert "/sys/class/drm is missing" in got["intel-gpu"].reason
    assert got["jetson"].reason == "not a Jetson: /etc/nv_tegra_release is missing and /sys/class/devfreq is missing"
    assert "no /dev/hailoN" in got["hailo"].reason and "0x1e60" in got["hailo"].reason
    assert got["qualcomm-npu"].reason == "no /dev/fastrpc-* or /dev/adsprpc-smd node (no FastRPC driver)"
    assert "vendor 0x1ae0" in got["cloud-tpu"].reason
    # what was looked at names the ids and paths, so that a user can check them by hand
    assert any("1a6e:089a" in s and "18d1:9302" in s for s in got["edgetpu-usb"].looked_for)
    assert any("1ac1:089a" in s for s in got["edgetpu-pcie"].looked_for)
    assert any("intel_vpu" in s for s in got["intel-npu"].looked_for)
    assert any("libedgetpu" in s for s in got["edgetpu-usb"].looked_for)


def test_what_is_there_instead_is_named(tmp_path):
    tree = FakeTree(tmp_path)
    tree.usb_device("usb1", "1d6b", "0002", "480", 1, 1)
    tree.usb_device("1-1", "046d", "c52b", "12", 1, 2)  # a mouse
    tree.class_device("drm", "renderD128", tree.platform_device("virtio0", driver="virtio_gpu"))
    tree.pci_device("0000:00:02.0", 0x8086, 0x1234, 0x030000, driver="i915-but-not-this-one")
    tree.file("/dev/fastrpc-adsp")
    got = families(edgeaccel.probe(tmp_path))
    assert got["edgetpu-usb"].reason.startswith("none of the 2 USB devices in /sys/bus/usb/devices has id "
                                                "1a6e:089a or 18d1:9302")
    assert "renderD128 (driver virtio_gpu)" in got["intel-gpu"].reason
    assert "among the 1 PCI devices" in got["cuda-gpu"].reason and "among the 1 PCI devices" in got["hailo"].reason
    assert got["qualcomm-npu"].reason == "only /dev/fastrpc-adsp, which are not the compute DSP"


def test_found_but_unusable_families_carry_the_fix(tmp_path):
    x86_with_coral_m2(tmp_path / "a", driver_loaded=False)
    no_driver = families(edgeaccel.probe(tmp_path / "a"))["edgetpu-pcie"]
    assert no_driver.status == "no-driver" and "apex driver does not have it" in no_driver.reason
    assert "gasket-dkms" in no_driver.fix
    x86_with_coral_m2(tmp_path / "b")
    denied = families(edgeaccel.probe(tmp_path / "b", identity=STRANGER))["edgetpu-pcie"]
    assert denied.status == "present" and "cannot read and write /dev/apex_0" in denied.reason
    assert "usermod -aG apex" in denied.fix
    assert families(edgeaccel.probe(tmp_path / "b"))["edgetpu-pcie"].status == "usable"


def test_a_reader_that_fails_leaves_its_family_not_checked(tmp_path, monkeypatch):
    from edgeaccel.hardware import survey

    def broken(*args, **kwargs):
        raise RuntimeError("reader bug")

    monkeypatch.setattr(survey, "read_hailo", broken)
    report = edgeaccel.probe(tmp_path)
    assert families(report)["hailo"].status == "not-checked"
    assert any("reader bug" in p.reason for p in report.problems)
    assert validate(report.to_dict()) == []


def test_plugins_handed_in_by_the_registry(tmp_path):
    rpi5_with_coral_usb(tmp_path)
    report = edgeaccel.probe(tmp_path)
    none = report.with_plugins([]).family("plugins")
    assert none.status == "absent" and "'edgeaccel.executors'" in none.reason
    some = report.with_plugins([PluginSeen("acme", ("AcmeNPU",), False, "no AcmeNPU device", "plug it in"),
                                PluginSeen("fast", ("FastGPU",), True, "fast-gpu 1.0")])
    family = some.family("plugins")
    assert family.status == "usable" and family.found == ("acme", "fast")
    assert family.devices == ("AcmeNPU", "FastGPU") and "acme (AcmeNPU): not available: no AcmeNPU" in family.reason
    assert [f.id for f in some.families] == [f.id for f in report.families]  # replaced in place
    assert validate(some.to_dict()) == []
    down = report.with_plugins([PluginSeen("acme", ("AcmeNPU",), False, "no AcmeNPU device", "plug it in")])
    assert down.family("plugins").status == "present" and down.family("plugins").fix == "plug it in"


def test_text_output_lists_every_family_when_nothing_is_found(tmp_path):
    FakeTree(tmp_path).dir("/proc")
    text = render(edgeaccel.probe(tmp_path).to_dict())
    lines = text.splitlines()
    none = next(line for line in lines if "none found" in line)
    assert "looked for" in lines
    for spec in FAMILIES:
        if spec.id != "plugins":
            assert spec.name in none
        assert any(line.startswith("  [") and spec.name in line for line in lines), spec.name
    assert "  [--] Coral Edge TPU (USB)" in text and "looked at: USB devices in /sys/bus/usb/devices" in text


def test_json_of_a_fake_root_from_the_command_line(cli, tmp_path):
    rpi5_with_coral_usb(tmp_path)
    out = cli("probe", "--json", "--root", str(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert validate(report) == []
    by_id = {f["id"]: f for f in report["families"]}
    assert by_id["edgetpu-usb"]["status"] == "usable"
    assert by_id["edgetpu-usb"]["found"] == ["Coral USB Accelerator at USB port 4-1"]
    assert by_id["cuda-gpu"]["status"] == "absent" and by_id["cuda-gpu"]["looked_for"]
