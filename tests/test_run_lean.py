"""`edgeaccel run model.tflite` imports what its path needs and no more (peak memory): no YAML parser
once the profiles were parsed, no Pillow for random input and only the plugin of the image's format otherwise,
no other command's modules, no calibration when nothing measures, no ONNX/OpenVINO readers for a .tflite."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, SAMPLES

MODEL = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"
# Each of these was imported by `run` on a .tflite before, and costs peak memory for nothing there.
# shutil is not in the list: the sample packs its labels in a zip after the flatbuffer, and zipfile imports it
NOT_NEEDED = ("yaml", "numpy.ma", "edgeaccel.selection.calibration", "edgeaccel.selection.background",
              "edgeaccel.formats.onnx", "edgeaccel.formats.openvino_ir", "edgeaccel.cli.bench_cmd",
              "edgeaccel.cli.tune_cmd", "edgeaccel.cli.probe_cmd")


def run_and_list_modules(cache, *args: str) -> tuple[dict, set[str]]:
    """`edgeaccel run ... --json` in a fresh interpreter: its report and the modules it imported."""
    code = ("import contextlib, io, json, sys; from edgeaccel.cli import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out): rc = main(sys.argv[1:])\n"
            "print(json.dumps({'rc': rc, 'report': json.loads(out.getvalue()), 'modules': sorted(sys.modules)}))")
    env = {**os.environ, "EDGEACCEL_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, "run", *args, "--json"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rc"] == 0
    return result["report"], set(result["modules"])


@pytest.mark.slow
def test_run_imports_only_what_its_path_needs(tmp_path):
    cache = tmp_path / "cache"
    first, _ = run_and_list_modules(cache, str(MODEL))  # parses the profiles' YAML once and keeps it
    report, modules = run_and_list_modules(cache, str(MODEL))
    assert report["outputs"] == first["outputs"] and report["executor"]["runtime"] == "litert"
    assert report["latency_ms"]["p50"] <= report["latency_ms"]["p99"] <= report["latency_ms"]["max"]
    assert "edgeaccel.loader" in modules and "edgeaccel.cli.run_cmd" in modules  # it did run
    assert sorted(m for m in NOT_NEEDED if m in modules) == []
    assert not [m for m in modules if m == "PIL" or m.startswith("PIL.")]  # random input: no image library


def test_run_on_a_png_imports_only_the_png_plugin(tmp_path):
    pytest.importorskip("PIL")
    report, modules = run_and_list_modules(tmp_path / "cache", str(MODEL), "--input", str(SAMPLES / "bird.png"))
    assert report["top_k"][0]["index"] == 20  # "chickadee" (samples/README.md; index 0 is the background)
    assert "PIL.PngImagePlugin" in modules
    assert not {"PIL.JpegImagePlugin", "PIL.GifImagePlugin", "PIL.BmpImagePlugin", "subprocess"} & modules


def test_profiles_are_parsed_once_and_kept_by_content(tmp_path, monkeypatch):
    from edgeaccel._data import data_dir
    from edgeaccel.profiles.loader import _parsed
    from edgeaccel.schema import load_yaml

    folder = tmp_path / "profiles"
    folder.mkdir()
    for source in sorted(data_dir("profiles").glob("*.yaml"))[:3]:
        (folder / source.name).write_bytes(source.read_bytes())
    paths = sorted(folder.glob("*.yaml"))
    monkeypatch.setenv("EDGEACCEL_CACHE_DIR", str(tmp_path / "cache"))
    expected = [load_yaml(p) for p in paths]
    assert _parsed(paths) == expected
    kept = list((tmp_path / "cache" / "profiles").glob("*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == expected
    assert _parsed(paths) == expected  # read back from what was kept
    # other bytes are parsed again (and kept beside): an edited profile is never answered from the old parse
    paths[0].write_text(paths[0].read_text().replace("title:", "title: Edited,", 1))
    edited = _parsed(paths)
    assert edited[0]["title"].startswith("Edited,") and edited[1:] == expected[1:]
    assert len(list((tmp_path / "cache" / "profiles").glob("*.json"))) == 2
    # a damaged file is parsed again, never trusted
    for path in (tmp_path / "cache" / "profiles").glob("*.json"):
        path.write_text('{"not": "a list"')
    assert _parsed(paths) == [load_yaml(p) for p in paths]
