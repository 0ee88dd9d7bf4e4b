"""Why the Edge TPU can or cannot be used, on fake device trees read by the real probe (tests run as root,
so permissions are judged for another account with probe.Identity, as the probe's own tests do)."""

from __future__ import annotations

import ctypes.util

import pytest

from conftest import without
from delegate import build
from edgeaccel.executors.edgetpu import parse_device, required_runtime_versions, runtime_version_number
from edgeaccel.executors.edgetpu_diagnosis import diagnose, parse_dpkg_versions
from edgeaccel.executors.litert import LiteRTExecutor
from edgeaccel.hardware import Identity
from edgeaccel.hardware.libraries import find_edgetpu_library
from edgeaccel.testing import coral_dev_board, rpi5_with_coral_usb, x86_with_coral_m2

STRANGER = Identity(uid=4242, gids=frozenset({4242}))
LITERT = ("ai-edge-litert", "2.3.0")
PI_LIBRARY = "/usr/lib/aarch64-linux-gnu/libedgetpu.so.1"


def test_coral_usb_present_but_no_library(tmp_path):
    tree = rpi5_with_coral_usb(tmp_path)
    tree.local(PI_LIBRARY).unlink()
    diagnosis = diagnose("EdgeTPU", root=tmp_path)
    assert not diagnosis.ok
    (blocking,) = diagnosis.blocking
    assert blocking.topic == "library"
    assert blocking.text.startswith("libedgetpu.so.1 (the Edge TPU delegate) is not on the loader path (searched "
                                    "/etc/ld.so.cache")
    assert blocking.text.endswith(", though Coral USB Accelerator at USB port 4-1 is present")
    assert "libedgetpu1-std" in diagnosis.fix
    assert [a.name for a in diagnosis.accelerators] == ["Coral USB Accelerator at USB port 4-1"]


def test_library_present_but_device_node_unreadable(tmp_path):
    x86_with_coral_m2(tmp_path)  # /dev/apex_0 is 0660 for group apex; STRANGER is not in it
    diagnosis = diagnose("EdgeTPU:pci", root=tmp_path, identity=STRANGER)
    assert not diagnosis.ok
    (blocking,) = diagnosis.blocking
    assert blocking.topic == "access"
    assert blocking.text == ("Coral Edge TPU (PCIe/M.2) apex_0: this user cannot read and write /dev/apex_0 "
                             "(group apex, mode 0660)")
    assert diagnosis.fix.startswith("add the user to group 'apex': sudo usermod -aG apex $USER")
    # the same tree for the running process (root) is fine: only access differed
    assert diagnose("EdgeTPU:pci", root=tmp_path).ok


def test_the_two_broken_trees_give_different_diagnoses(tmp_path):
    rpi5_with_coral_usb(tmp_path / "a").local(PI_LIBRARY).unlink()
    x86_with_coral_m2(tmp_path / "b")
    no_library = diagnose(root=tmp_path / "a")
    unreadable = diagnose(root=tmp_path / "b", identity=STRANGER)
    assert no_library.reason != unreadable.reason and no_library.fix != unreadable.fix


def test_a_working_coral_usb_on_usb3(tmp_path):
    rpi5_with_coral_usb(tmp_path)
    diagnosis = diagnose("EdgeTPU:usb", root=tmp_path, litert=LITERT)
    assert diagnosis.ok and not diagnosis.warnings[1:]
    assert diagnosis.reason.startswith("Coral USB Accelerator at USB port 4-1 with the delegate " + PI_LIBRARY)
    # on a fake tree the library is found but not loaded (it is not this machine's)
    assert "not loaded: the probed root is not this machine" in diagnosis.reason


def test_a_coral_usb_on_a_usb2_port_works_slowly_and_says_so(tmp_path):
    tree = rpi5_with_coral_usb(tmp_path)
    tree.file("/sys/devices/platform/usb4/4-1/speed", "480\n")
    diagnosis = diagnose("EdgeTPU", root=tmp_path)
    assert diagnosis.ok  # slow, not broken
    slow = [w for w in diagnosis.warnings if w.topic == "usb-speed"]
    assert len(slow) == 1 and "480 Mb/s (a USB 2 link)" in slow[0].text and "USB 3 port" in slow[0].fix
    assert "USB 2" in diagnosis.reason and "USB 3 port" in diagnosis.fix


def test_before_its_firmware_the_usb2_speed_is_not_blamed(tmp_path):
    rpi5_with_coral_usb(tmp_path, firmware_loaded=False)
    diagnosis = diagnose("EdgeTPU:usb", root=tmp_path)
    assert diagnosis.ok and "has not loaded its firmware yet" in diagnosis.reason
    assert not [w for w in diagnosis.warnings if "USB 2" in w.text]


def test_asking_for_the_other_kind_names_the_one_that_is_there(tmp_path):
    rpi5_with_coral_usb(tmp_path)
    diagnosis = diagnose("EdgeTPU:pci", root=tmp_path)
    assert not diagnosis.ok
    assert "no PCIe/M.2 Edge TPU" in diagnosis.reason and "Coral USB Accelerator at USB port 4-1" in diagnosis.reason
    assert diagnosis.fix == "use device 'EdgeTPU:usb'"


def test_an_index_past_the_devices_there(tmp_path):
    rpi5_with_coral_usb(tmp_path)
    diagnosis = diagnose("EdgeTPU:usb:1", root=tmp_path)
    assert not diagnosis.ok
    assert diagnosis.reason == ("EdgeTPU:usb:1 asks for USB Edge TPU number 1 (counting from 0) but 1 is here "
                                "(sysfs)")
    assert diagnose("EdgeTPU:usb:0", root=tmp_path).ok


def test_a_pcie_card_without_its_driver(tmp_path):
    x86_with_coral_m2(tmp_path, driver_loaded=False)
    diagnosis = diagnose("EdgeTPU", root=tmp_path)
    assert not diagnosis.ok and "apex driver does not have it" in diagnosis.reason
    assert "gasket-dkms" in diagnosis.fix


def test_the_dev_board(tmp_path):
    coral_dev_board(tmp_path)
    assert diagnose("EdgeTPU:pci:0", root=tmp_path).ok
    assert not diagnose("EdgeTPU:pci:0", root=tmp_path, identity=STRANGER).ok


def test_googles_libedgetpu_with_a_newer_litert_is_a_warning_with_the_reason(tmp_path):
    tree = rpi5_with_coral_usb(tmp_path)
    tree.file("/var/lib/dpkg/status", "Package: libusb-1.0-0\nStatus: install ok installed\nVersion: 2:1.0.26-1\n\n"
                                      "Package: libedgetpu1-std\nStatus: install ok installed\nArchitecture: arm64\n"
                                      "Version: 16.0\nDescription: Support library for Edge TPU\n")
    diagnosis = diagnose("EdgeTPU", root=tmp_path, litert=LITERT)
    assert diagnosis.ok
    (old,) = [w for w in diagnosis.warnings if w.topic == "version"]
    assert "libedgetpu1-std 16.0 is Google's build against TensorFlow 2.5" in old.text
    assert "google-coral/edgetpu#812" in old.text and "libedgetpu" in old.fix
    # the same package with an older TFLite is not flagged
    assert not [w for w in diagnose(root=tmp_path, litert=("tflite-runtime", "2.5.0")).warnings
                if w.topic == "version"]


def test_a_rebuilt_libedgetpu_says_which_tensorflow_it_was_built_for(tmp_path):
    tree = rpi5_with_coral_usb(tmp_path)
    tree.file("/var/lib/dpkg/status", "Package: libedgetpu1-max\nStatus: install ok installed\n"
                                      "Version: 16.0tf2.19.1-1.bookworm\n")
    (info,) = [w for w in diagnose(root=tmp_path, litert=LITERT).warnings if w.topic == "version"]
    assert info.text == ("libedgetpu1-max 16.0tf2.19.1-1.bookworm is built against TensorFlow 2.19.1; this LiteRT "
                         "is ai-edge-litert 2.3.0") and info.fix is None


@without("EdgeTPU")
def test_the_runtime_version_is_read_from_the_library_itself(tmp_path, monkeypatch):
    try:
        library = build(tmp_path, version="BuildLabel(COMPILER=6.3.0 20170516,DATE=redacted), RuntimeVersion(13)")
    except FileNotFoundError:
        pytest.skip("gcc is not installed")
    diagnosis = diagnose("EdgeTPU", library=str(library))  # this machine: the library loads, no device
    assert diagnosis.details["runtime_version"].endswith("RuntimeVersion(13)")
    assert any("Edge TPU runtime version 13" in f.text for f in diagnosis.findings)


def test_version_strings():
    assert runtime_version_number("BuildLabel(COMPILER=6.3.0 20170516,DATE=redacted,TIME=redacted), "
                                  "RuntimeVersion(14)") == 14
    assert runtime_version_number("") is None
    # the text libedgetpu gives a model from a newer compiler (google-coral/edgetpu#435)
    message = ("Failed to prepare for TPU. Failed precondition: Package requires runtime version (14), which is "
               "newer than this runtime version (13).Node number 2 (EdgeTpuDelegateForCustomOp) failed to prepare.")
    assert required_runtime_versions(message) == (14, 13)
    assert parse_dpkg_versions("Package: libedgetpu1-std\nStatus: deinstall ok config-files\nVersion: 15.0\n") == {}


@pytest.mark.parametrize("text, kind, index, option", [("EdgeTPU", None, None, None), ("EdgeTPU:3", None, 3, ":3"),
                                                        ("EdgeTPU:usb", "usb", None, "usb"),
                                                        ("EdgeTPU:pci:0", "pci", 0, "pci:0")])
def test_device_strings(text, kind, index, option):
    spec = parse_device(text)
    assert (spec.kind, spec.index, spec.option) == (kind, index, option)


@pytest.mark.parametrize("text", ["EdgeTPU:", "EdgeTPU:usb:", "EdgeTPU:usb:-1", "EdgeTPU:gpu", "edgetpu",
                                  "EdgeTPU:usb:0:1", "EdgeTPU:0:usb"])
def test_bad_device_strings(text):
    with pytest.raises(ValueError, match="not an Edge TPU device"):
        parse_device(text)


@without("EdgeTPU")
def test_availability_here_names_what_is_missing():
    """This machine has no Edge TPU (no Coral on its USB bus or PCI bus), and the answer says so along with
    whether libedgetpu is on the loader path; it must not be LiteRT's bare "Failed to load delegate"."""
    available = LiteRTExecutor.availability("EdgeTPU")
    assert not available
    assert available.reason.startswith("no Edge TPU on this machine: no Coral USB Accelerator on the USB bus")
    library_missing = not find_edgetpu_library().found
    assert ("libedgetpu.so.1 (the Edge TPU delegate) is not on the loader path" in available.reason) == library_missing
    assert (ctypes.util.find_library("edgetpu") is None) == library_missing
    assert "connect a Coral Edge TPU" in available.fix
    assert "not an Edge TPU device" in LiteRTExecutor.availability("EdgeTPU:usb:x").reason


def test_availability_on_fake_trees_matches_the_diagnosis(tmp_path):
    x86_with_coral_m2(tmp_path)
    assert LiteRTExecutor.availability("EdgeTPU", root=tmp_path)
    denied = LiteRTExecutor.availability("EdgeTPU", root=tmp_path, identity=STRANGER)
    assert not denied and "cannot read and write /dev/apex_0" in denied.reason and "usermod -aG apex" in denied.fix


def _package(root, files: dict[str, str]):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_coral_pycoral_is_used_when_importable_and_the_pypi_namesake_is_not(tmp_path, monkeypatch):
    """Coral's pycoral is not on PyPI and the PyPI project named pycoral is unrelated: only a pycoral with
    pycoral.utils.edgetpu counts. Stand-ins of both are put on sys.path here; neither is a dependency."""
    import sys

    from edgeaccel.executors.edgetpu import pycoral_edge_tpus

    assert pycoral_edge_tpus() is None  # not installed here
    coral, namesake = tmp_path / "coral", tmp_path / "namesake"
    _package(coral, {"pycoral/__init__.py": "", "pycoral/utils/__init__.py": "",
                     "pycoral/utils/edgetpu.py": "def list_edge_tpus():\n"
                                                 "    return [{'type': 'usb', 'path': '/sys/bus/usb/devices/4-1'},\n"
                                                 "            {'type': 'pci', 'path': '/dev/apex_0'}]\n"})
    _package(namesake, {"pycoral/__init__.py": "VERSION = 'unrelated'\n"})
    for folder, expected in ((namesake, None), (coral, [{"type": "usb", "path": "/sys/bus/usb/devices/4-1"},
                                                        {"type": "pci", "path": "/dev/apex_0"}])):
        with monkeypatch.context() as m:
            m.syspath_prepend(str(folder))
            for name in [n for n in sys.modules if n == "pycoral" or n.startswith("pycoral.")]:
                m.delitem(sys.modules, name)
            assert pycoral_edge_tpus() == expected
    for name in [n for n in sys.modules if n == "pycoral" or n.startswith("pycoral.")]:
        del sys.modules[name]
