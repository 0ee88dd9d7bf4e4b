"""What `explain` says about an Edge TPU-compiled model: each missing piece (device, library, permission) with
its own fix, and the CPU twin that runs it instead. Real probe readers on fake device trees (tests run as
root, so permissions are judged for another account with probe.Identity); real compiled models and their
twins from the shared models."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS
from edgeaccel.executors.edgetpu_explanation import PIECES, TWIN_SOURCE_FIX, cpu_twin, explain_edgetpu_model
from edgeaccel.formats import describe
from edgeaccel.hardware import Identity
from edgeaccel.testing import FakeTree, rpi5_with_coral_usb, x86_with_coral_m2

STRANGER = Identity(uid=4242, gids=frozenset({4242}))
PLUGDEV = 46
COMPILED = "mobilenet_v1_0.25_128_quant_edgetpu.tflite"
TWIN = "mobilenet_v1_0.25_128_quant.tflite"
PI_LIBRARY = "/usr/lib/aarch64-linux-gnu/libedgetpu.so.1"


@pytest.fixture
def compiled_alone(tmp_path):
    """A compiled model in a folder without its twin."""
    folder = tmp_path / "models"
    folder.mkdir()
    return shutil.copy(MODELS / COMPILED, folder / COMPILED)


def pieces(explanation) -> dict:
    assert tuple(p.name for p in explanation.pieces) == PIECES
    return {p.name: p for p in explanation.pieces}


def test_nothing_there_names_all_three_pieces_each_with_its_own_fix(tmp_path, compiled_alone):
    FakeTree(tmp_path / "root").groups(plugdev=PLUGDEV).dir("/dev")
    explanation = explain_edgetpu_model(compiled_alone, root=tmp_path / "root", identity=STRANGER)
    got = pieces(explanation)
    assert not explanation.ok and [p.name for p in explanation.missing] == list(PIECES)
    assert "no Coral USB Accelerator on the USB bus" in got["device"].text and "Coral" in got["device"].fix
    assert got["library"].text.startswith("libedgetpu.so.1 (the Edge TPU delegate) is not on the loader path")
    assert "libedgetpu1-std" in got["library"].fix
    assert got["permission"].text.startswith("no udev rule gives a Coral USB Accelerator to a group")
    assert "99-edgetpu-accelerator.rules" in got["permission"].fix
    assert len({p.fix for p in got.values()}) == 3
    for name in PIECES:  # the one-line reason and the fix name each piece
        assert f"{name}: " in explanation.reason and f"{name}: " in explanation.fix
    assert explanation.twin.path is None and TWIN in explanation.twin.text
    assert explanation.fix.endswith(TWIN_SOURCE_FIX)


def test_the_library_alone_missing(tmp_path):
    rpi5_with_coral_usb(tmp_path).local(PI_LIBRARY).unlink()
    got = pieces(explain_edgetpu_model(MODELS / COMPILED, root=tmp_path))
    assert [n for n, p in got.items() if p.missing] == ["library"]
    assert got["device"].text == "Coral USB Accelerator at USB port 4-1 is present"
    assert got["permission"].text == "this user can open /dev/bus/usb/004/002"


def test_the_permission_alone_missing_with_a_device_present(tmp_path):
    x86_with_coral_m2(tmp_path)  # /dev/apex_0 is 0660 for group apex; STRANGER is not in it
    explanation = explain_edgetpu_model(MODELS / COMPILED, "EdgeTPU:pci", root=tmp_path, identity=STRANGER)
    got = pieces(explanation)
    assert [n for n, p in got.items() if p.missing] == ["permission"]
    assert "cannot read and write /dev/apex_0 (group apex, mode 0660)" in got["permission"].text
    assert got["permission"].fix.startswith("add the user to group 'apex'")
    assert got["library"].text.startswith("libedgetpu.so.1 is at /usr/lib/")


def test_without_a_device_the_udev_rules_say_whether_the_user_could_open_one(tmp_path, compiled_alone):
    tree = FakeTree(tmp_path).groups(plugdev=PLUGDEV).dir("/dev")
    tree.file("/lib/udev/rules.d/60-libedgetpu1-std.rules",
              '# Coral USB Accelerator\nSUBSYSTEM=="usb",ATTRS{idVendor}=="1a6e",GROUP="plugdev"\n'
              'SUBSYSTEM=="usb",ATTRS{idVendor}=="18d1",GROUP="plugdev"\n')
    outsider = pieces(explain_edgetpu_model(compiled_alone, "EdgeTPU:usb", root=tmp_path, identity=STRANGER))
    assert outsider["permission"].missing
    assert outsider["permission"].text == ("/lib/udev/rules.d/60-libedgetpu1-std.rules gives a Coral USB Accelerator "
                                           "to group plugdev, which this user is not in")
    assert outsider["permission"].fix.startswith("sudo usermod -aG plugdev $USER")
    member = Identity(uid=4242, gids=frozenset({4242, PLUGDEV}))
    inside = pieces(explain_edgetpu_model(compiled_alone, "EdgeTPU:usb", root=tmp_path, identity=member))
    assert not inside["permission"].missing and "group plugdev, which this user is in" in inside["permission"].text
    # the admin's file of the same name in /etc overrides the package's
    tree.file("/etc/udev/rules.d/60-libedgetpu1-std.rules", 'SUBSYSTEM=="usb",ATTRS{idVendor}=="18d1",MODE="0666"\n')
    opened = pieces(explain_edgetpu_model(compiled_alone, "EdgeTPU:usb", root=tmp_path, identity=STRANGER))
    assert not opened["permission"].missing and "gives it to everyone" in opened["permission"].text
    assert pieces(explain_edgetpu_model(compiled_alone, root=tmp_path))["permission"].text.startswith(
        "this process runs as root")


def test_a_working_edgetpu_is_ok_and_needs_no_fix(tmp_path):
    rpi5_with_coral_usb(tmp_path)
    explanation = explain_edgetpu_model(MODELS / COMPILED, root=tmp_path)
    assert explanation.ok and not explanation.missing and explanation.fix is None
    assert explanation.reason.startswith(f"the Edge TPU can run {COMPILED}: Coral USB Accelerator")


def test_the_twin_beside_it_is_named_and_runs_with_the_same_inputs_and_outputs():
    twin = cpu_twin(MODELS / COMPILED)
    assert twin.path == MODELS / TWIN and twin.fix is None and f"edgeaccel.load('{MODELS / TWIN}')" in twin.text
    compiled = describe(MODELS / COMPILED)
    with edgeaccel.load(twin.path) as model:
        assert [(s.shape, s.dtype) for s in model.inputs] == [(s.shape, s.dtype) for s in compiled.inputs]
        assert [(s.shape, s.dtype) for s in model.outputs] == [(s.shape, s.dtype) for s in compiled.outputs]
        out = model.run(np.zeros(model.inputs[0].shape, model.inputs[0].dtype))
        assert out[0].shape == compiled.outputs[0].shape
    explanation = explain_edgetpu_model(MODELS / COMPILED, root=MODELS)  # a root with no Edge TPU at all
    assert explanation.fix.endswith(f"or run it on the CPU now: load its CPU twin {MODELS / TWIN}")
    assert "CPU twin" in explanation.lines()[-1] and explanation.lines()[-1].startswith("[ok]")


def test_a_twin_that_is_not_one(tmp_path, compiled_alone):
    folder = compiled_alone.parent
    missing = cpu_twin(compiled_alone)
    assert missing.path is None and missing.fix.startswith(f"put {TWIN} beside it")
    shutil.copy(MODELS / COMPILED, folder / TWIN)  # a second compiled model under the twin's name
    assert "is edgetpu-tflite, not a plain .tflite" in cpu_twin(compiled_alone).text
    (folder / TWIN).write_bytes(b"not a model")
    assert "is beside it but is not a model" in cpu_twin(compiled_alone).text
    renamed = shutil.copy(MODELS / COMPILED, folder / "detector.tflite")
    odd = cpu_twin(renamed)
    assert odd.path is None and "cannot be named" in odd.text and TWIN_SOURCE_FIX in odd.fix


def test_to_dict_and_a_bad_device_string(tmp_path):
    FakeTree(tmp_path).dir("/dev")
    data = explain_edgetpu_model(MODELS / COMPILED, root=tmp_path).to_dict()
    assert [p["name"] for p in data["pieces"]] == list(PIECES) and data["cpu_twin"]["path"] == str(MODELS / TWIN)
    with pytest.raises(ValueError):
        explain_edgetpu_model(MODELS / COMPILED, "EdgeTPU:floppy", root=tmp_path)
