"""`edgeaccel profiles list | show | validate`: output, JSON, and one error line per broken file (exit 7)."""

from __future__ import annotations

import json

from edgeaccel.cli import EXIT_CONFIG, main
from edgeaccel.profiles import load_profiles, match_profile
from edgeaccel.loader import machine_facts

BROKEN_TYPE = """\
schema: edgeaccel.profile/1
name: broken
title: Broken
match: {arch: [x86_64]}
accelerators: [{device: CPU, kind: cpu, name: CPU}]
preference: {latency: [CPU], efficiency: [CPU]}
thermal: {passive_c: hot}
"""


def test_list_marks_the_profile_of_this_machine(capsys):
    assert main(["profiles", "list"]) == 0
    out = capsys.readouterr().out
    assert "rpi5-coral-usb" in out and "cloud-tpu-vm" in out
    expected, _ = match_profile(machine_facts()[1], load_profiles())  # whatever this machine is
    marked = [line.split()[1] for line in out.splitlines() if line.startswith("* ") and "this machine" not in line]
    assert marked == ([expected.name] if expected else [])
    if expected:
        assert f"* this machine: {expected.name}, by " in out


def test_list_json(capsys):
    assert main(["profiles", "list", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == "edgeaccel.profiles/1"
    assert report["this_machine"]["accelerators_probed"] is False
    assert {"name", "title", "accelerators", "matches_this_machine"} <= set(report["profiles"][0])


def test_show_readable_and_json(capsys):
    assert main(["profiles", "show", "rpi5-coral-usb"]) == 0
    out = capsys.readouterr().out
    assert "INT8 TOPS 4" in out and "coral.ai" in out and "passive 80 °C" in out
    assert main(["profiles", "show", "cloud-tpu-vm", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "cloud-tpu-vm" and data["accelerators"][0]["tflops_bf16"] == 197.0


def test_show_an_unknown_name_is_a_config_error(capsys):
    assert main(["profiles", "show", "rpi6"]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert err.startswith("error: unknown profile 'rpi6'") and "rpi5" in err


def test_validate_ok_and_one_line_per_broken_file(tmp_path, capsys):
    from edgeaccel._data import data_dir

    good = data_dir("profiles") / "rpi5.yaml"
    bad_type = tmp_path / "bad_type.yaml"
    bad_type.write_text(BROKEN_TYPE)
    bad_yaml = tmp_path / "bad_yaml.yaml"
    bad_yaml.write_text("name: [x\n")
    assert main(["profiles", "validate", str(good)]) == 0
    assert "ok" in capsys.readouterr().out
    assert main(["profiles", "validate", str(bad_type), str(good), str(bad_yaml)]) == EXIT_CONFIG
    captured = capsys.readouterr()
    assert f"{good}: ok" in captured.out
    errors = captured.err.splitlines()
    assert len(errors) == 2
    assert errors[0] == f"error: {bad_type}:thermal.passive_c: expected a number, got str 'hot'"
    # libyaml and the pure-Python parser word the problem differently; the place is what matters
    assert errors[1].startswith(f"error: {bad_yaml}: is not valid YAML at line 2, column 1: ")
    assert "']'" in errors[1]


def test_the_command_line_entry_point(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BROKEN_TYPE.replace("title: Broken\n", ""))
    out = cli("profiles", "validate", str(bad), timeout=60)
    assert out.returncode == 7, out.stderr
    assert out.stderr.strip() == f"error: {bad}:title: is required"
