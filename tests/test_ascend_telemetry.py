"""Ascend NPU temperature and power through ``npu-smi info``: the table parsed from sample text, and the reader
running the npu-smi found below a telemetry root (on fake trees, a stand-in script that prints the sample).

The samples are TEST DATA written in the table layout npu-smi prints (as Huawei's install guides and ModelZoo
READMEs reproduce it for the 310, 310P and 910B); none was captured from a board here."""

from __future__ import annotations

import pytest

from edgeaccel.telemetry import npu_smi
from edgeaccel.telemetry.sensors import auto_spec, read_power, read_temperature
from edgeaccel.testing import FakeTree, atlas_200_dk
from edgeaccel.testing.boards import NPU_SMI_310_SAMPLE

# 310P: power not measured on this card ("NA"), two NPUs of one chip each, the process table after them
SAMPLE_310P = """\
+--------------------------------------------------------------------------------------------------------+
| npu-smi 25.3.rc1                                 Version: 25.3.rc1                                     |
+-------------------------------+-----------------+------------------------------------------------------+
| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |
| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |
+===============================+=================+======================================================+
| 6       310P3                 | OK              | NA           50                0     / 0             |
| 0       0                     | 0000:84:00.0    | 0            1839 / 21525                            |
+===============================+=================+======================================================+
| 7       310P3                 | Warning         | NA           52                0     / 0             |
| 0       1                     | 0000:85:00.0    | 3            1840 / 21525                            |
+===============================+=================+======================================================+
+-------------------------------+-----------------+------------------------------------------------------+
| NPU     Chip                  | Process id      | Process name             | Process memory(MB)        |
+===============================+=================+======================================================+
| 6       0                     | 4242            | python3                  | 120                       |
+===============================+=================+======================================================+
"""
# 910B: one "Chip" column in the second header row and an HBM column
SAMPLE_910B = """\
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 2     910B4               | OK            | 88.9        39                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          2858 / 32768         |
+===========================+===============+====================================================+
"""


def test_the_310_table():
    (chip,) = npu_smi.parse_info(NPU_SMI_310_SAMPLE)
    assert (chip.npu, chip.chip, chip.name, chip.health, chip.bus_id) == (0, 0, "310", "OK", "0000:01:00.0")
    assert (chip.temperature.value, chip.temperature.unit, chip.power.value, chip.power.unit) == (61.0, "C", 12.8, "W")
    assert (chip.aicore_percent, chip.memory_used_mb, chip.memory_total_mb) == (0.0, 577.0, 7759.0)
    assert chip.spec == "npusmi:0"


def test_the_310p_table_with_na_power_and_a_process_table():
    chips = npu_smi.parse_info(SAMPLE_310P)
    assert [(c.npu, c.chip, c.health, c.temperature.value) for c in chips] == [(6, 0, "OK", 50.0),
                                                                                (7, 0, "Warning", 52.0)]
    assert not chips[0].power.ok and chips[0].power.reason == "npu-smi prints NA (this board does not report it)"
    assert chips[1].aicore_percent == 3.0 and chips[1].memory_total_mb == 21525.0


def test_the_910b_table():
    (chip,) = npu_smi.parse_info(SAMPLE_910B)
    assert (chip.npu, chip.name, chip.power.value, chip.temperature.value) == (2, "910B4", 88.9, 39.0)
    assert (chip.memory_used_mb, chip.memory_total_mb) == (0.0, 0.0)  # the DDR column; HBM is not read


@pytest.mark.parametrize("text", ["", "npu-smi: command not found", "| a | b |\n| c | d |"])
def test_text_without_the_table_lists_no_chip(text):
    assert npu_smi.parse_info(text) == []


def test_the_reader_runs_npu_smi_below_the_telemetry_root(tmp_path):
    atlas_200_dk(tmp_path)
    spec = auto_spec("npu", tmp_path)
    assert (spec.temperature, spec.power) == ("npusmi:0", "npusmi:0")
    assert read_temperature("npusmi:0", tmp_path).reading.value == 61.0
    assert read_power("npusmi:0", tmp_path).value == 12.8
    assert read_power("npusmi:3", tmp_path).reason == "npu-smi lists no NPU 3 (it lists npusmi:0)"
    assert "not NPU[/CHIP] numbers" in read_temperature("npusmi:x", tmp_path).reading.reason


def test_without_npu_smi_the_npu_has_no_sensor_and_says_why(tmp_path):
    atlas_200_dk(tmp_path, driver=False)
    spec = auto_spec("npu", tmp_path)
    assert spec.temperature is None and spec.power is None
    assert "no npu-smi" in spec.note_for("temperature")
    assert read_temperature("npusmi:0", tmp_path).reading.reason.startswith("npu-smi is not installed")


def test_an_npu_smi_that_lists_nothing_says_what_it_said(tmp_path):
    tree = FakeTree(tmp_path)
    tree.file("/usr/local/sbin/npu-smi", "#!/bin/sh\necho 'dcmi module initialize failed. ret is -8005' >&2\nexit 2\n",
              mode=0o755)
    chips, reason = npu_smi.read_chips(tmp_path)
    assert chips == [] and reason == "npu-smi info listed no NPU (exit 2: dcmi module initialize failed. ret is -8005)"


def test_an_npu_smi_that_cannot_run(tmp_path):
    FakeTree(tmp_path).file("/usr/local/bin/npu-smi", "not executable", mode=0o644)  # no execute bit: not even root
    assert npu_smi.read_chips(tmp_path)[1] == "npu-smi could not be run: Permission denied"
