"""`edgeaccel probe` from a real subprocess: exit 0, JSON that parses and validates, readable sections."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from edgeaccel.hardware.schema import validate
from edgeaccel.testing import rpi5_with_coral_usb


def test_json_of_this_machine(cli):
    out = cli("probe", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert validate(report) == []
    # every registered runtime appears (installed tensorflow-cpu too, which the survey once left out)
    assert report["runtimes"]["surveyed"] and {r["name"] for r in report["runtimes"]["items"]} == {
        "litert", "onnxruntime", "openvino", "tensorflow", "tensorrt"}
    tensorflow = next(r for r in report["runtimes"]["items"] if r["name"] == "tensorflow")
    assert tensorflow["installed"] == (importlib.util.find_spec("tensorflow") is not None)
    assert not tensorflow["installed"] or "CPU" in tensorflow["reaches"]


def test_readable_survey_of_a_fake_board(cli, tmp_path):
    rpi5_with_coral_usb(tmp_path)
    out = cli("probe", "--root", str(tmp_path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for section in ("machine", "accelerators", "runtimes", "telemetry", "problems"):
        assert section in lines, section
    assert "[ok] Coral USB Accelerator at USB port 4-1  -> EdgeTPU, EdgeTPU:usb" in out.stdout
    assert "Raspberry Pi 5 Model B Rev 1.0" in out.stdout and "not surveyed" in out.stdout


def test_a_root_that_is_not_a_directory_is_one_clear_error(cli, tmp_path):
    out = cli("probe", "--root", str(tmp_path / "missing"))
    assert out.returncode == 4 and out.stderr.startswith("error: --root") and "Traceback" not in out.stderr


@pytest.mark.parametrize("first", ["import edgeaccel.hardware.report", "edgeaccel.probe",
                                   "import edgeaccel.probe.report", "from edgeaccel.probe import ProbeReport"])
def test_probe_is_callable_and_keeps_its_names_whichever_comes_first(first):
    """edgeaccel.probe is defined in edgeaccel/__init__.py; the survey lives in edgeaccel.hardware, and importing
    a module by its old path (edgeaccel.probe.report, with a DeprecationWarning) leaves edgeaccel.probe callable."""
    code = (f"import edgeaccel; {first}; r = edgeaccel.probe(runtimes=False); "
            "print(sorted(r.present_devices()), type(r).__name__, edgeaccel.probe.Identity.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["['CPU']", "ProbeReport", "Identity"]
