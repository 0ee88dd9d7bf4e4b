"""`edgeaccel run MODEL --duration S --policy P` from a real subprocess: live lines, summary, trace CSV; the
simulated path labels its figures; bad combinations are one clear error."""

from __future__ import annotations

import csv
import json

from conftest import SAMPLES

MODEL = str(SAMPLES / "mobilenet_v1_0.25_128_quant.tflite")



def test_sustained_run_on_this_machine_shows_live_lines_summary_and_trace(cli, tmp_path):
    trace = tmp_path / "trace.csv"
    out = cli("run", MODEL, "--duration", "2.5", "--policy", "thermal", "--trace", str(trace))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    live = [line for line in lines if "inf/s" in line and "p99" in line]
    assert len(live) >= 2  # one per second (a line each, since stdout is not a terminal)
    assert any(line.startswith("executor  litert:CPU") for line in lines)
    assert "summary" in lines and any("policy thermal:" in line for line in lines)
    assert any("no temperature" in line for line in lines)  # no sensors here: said, not hidden
    rows = list(csv.DictReader(trace.open()))
    assert rows and rows[0]["action"] == "no_telemetry" and "serving unthrottled" in rows[0]["reason"]


def test_simulated_run_labels_every_figure(cli, tmp_path):
    trace = tmp_path / "sim.csv"
    out = cli("run", MODEL, "--simulate", "--duration", "300", "--policy", "thermal", "--ambient", "40",
              "--trace", str(trace))
    assert out.returncode == 0, out.stderr
    figures = out.stdout.splitlines()
    assert figures and all(line.startswith("[simulated]") for line in figures), figures
    assert any("accel" in line and "C" in line for line in figures)
    header = trace.read_text().splitlines()[0]
    assert header.startswith("simulated_time_s,") and "simulated_accel_temp_c" in header


def test_simulated_json_keeps_figures_under_a_simulated_key(cli):
    out = cli("run", MODEL, "--simulate", "--duration", "60", "--policy", "latency", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["schema"] == "edgeaccel.run.sustained/1" and report["simulated"]["completed"] > 0


def test_power_policy_needs_a_budget(cli):
    out = cli("run", MODEL, "--duration", "1", "--policy", "power")
    assert out.returncode == 4 and "--power-budget" in out.stderr


def test_sustained_json_on_this_machine(cli):
    out = cli("run", MODEL, "--duration", "1.5", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["schema"] == "edgeaccel.run.sustained/1" and report["simulated"] is False
    assert report["completed"] > 0 and "litert:CPU" in report["executors"] and report["policy"] == "thermal"
