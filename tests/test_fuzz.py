"""The bounded CI part of the fuzz campaign (tools/fuzz_models.py runs the long one).

Seeded mutants of the shared models go through edgeaccel.load + run in a child process, so a crash of the
default path is observed, not fatal. Each campaign is bounded by count and by time; the seeds differ from
the long campaigns' so that CI adds coverage. A campaign that reached no runtime would prove nothing, so
each also asserts that some mutants loaded and ran. Time budgets (140 s in all, worst case) keep the file
within CI's ~3 minutes on a slow machine; on the 2-core development machine it takes about 40 s.
"""

from __future__ import annotations

import pytest

from conftest import MODELS
from edgeaccel.fuzzing import harness
from tflite_edit import edit, first_op

pytestmark = [pytest.mark.shared, pytest.mark.slow]


def _report(summary: harness.Summary) -> str:
    lines = [f"{d.get('index')} {d.get('seed_model')} {d['outcome']} {d.get('signal') or d.get('error')} "
             f"{d.get('mutations')} {str(d.get('message'))[:200]}" for d in summary.defects]
    return "\n".join(lines)


@pytest.mark.parametrize("fmt, count, budget", [("tflite", 500, 40.0), ("onnx", 300, 25.0), ("ir", 60, 20.0)])
def test_default_path_survives_mutants(fmt, count, budget, tmp_path):
    seeds = harness.corpus(fmt, MODELS, tmp_path / "zoo")
    summary = harness.campaign(fmt, seeds, seed=9001, count=count, workdir=tmp_path / "run", time_budget=budget,
                               timeout=60)
    assert summary.total >= min(count, 20), "the campaign ran too few mutants to mean anything"
    assert summary.clean, _report(summary)
    assert _reached_a_runtime(summary) > 0 and summary.outcomes["error"] > 0


def _reached_a_runtime(summary: harness.Summary) -> int:
    """Mutants that got past validation: they loaded, or a runtime refused them."""
    refused_before = ("ModelValidationError", "UnsupportedFormatError")
    return summary.outcomes["ok"] + sum(n for key, n in summary.errors.items() if not key.endswith(refused_before))


def test_isolated_path_survives_mutants(tmp_path):
    for fmt, count in (("tflite", 120), ("onnx", 60)):
        seeds = harness.corpus(fmt, MODELS, tmp_path / "zoo")
        summary = harness.campaign(fmt, seeds, seed=9002, count=count, workdir=tmp_path / fmt, isolate=True,
                                   limits={"load_timeout": 30, "run_timeout": 10}, time_budget=25.0, timeout=90)
        assert summary.total >= 10
        assert summary.clean, _report(summary)
        assert summary.outcomes["ok"] > 0, summary.errors  # some mutants must have loaded in a worker


def test_mutants_are_reproducible_from_their_seed():
    seeds = harness.corpus("tflite", MODELS)
    a = [(m.seed_model, m.mutations, m.data) for m in harness.mutants("tflite", seeds, seed=4, count=5, start=10)]
    b = [(m.seed_model, m.mutations, m.data) for m in harness.mutants("tflite", seeds, seed=4, count=5, start=10)]
    assert a == b
    assert len({d for _, _, d in a}) == 5


def test_the_harness_observes_a_death(tmp_path):
    """Without this, '0 deaths' could mean the harness cannot see one. The raw runtime on a file that kills
    it: the harness reports the signal; edgeaccel on the same file: a clean refusal."""
    path = edit(MODELS / "deeplabv3_mnv2_dm05_pascal_quant.tflite", tmp_path / "m.tflite", _zero_scale_on_add)
    runner = harness.ChildRunner()
    try:
        raw = runner.run({"path": str(path), "raw": "litert"}, timeout=60)
        ours = runner.run({"path": str(path)}, timeout=60)
    finally:
        runner.close()
    assert raw["outcome"] == "died" and raw["signal"] == "SIGABRT"
    assert ours["outcome"] == "error" and ours["error"] == "ModelValidationError"


def test_isolation_contains_mutants_that_crash_the_runtime(tmp_path):
    """Validation refuses every crashing mutant we know, so the isolate=True campaign above may never see a
    crash. Here mutants go to LiteRT in a worker without validation: the caller must still see only
    edgeaccel errors. Which mutants crash LiteRT varies from run to run (runtime facts), so the crash itself is
    asserted on a file that kills LiteRT every time (SIGABRT on a zero scale)."""
    seeds = harness.corpus("tflite", MODELS)
    summary = harness.campaign("tflite", seeds, seed=1, count=8, workdir=tmp_path / "run", isolate=True,
                               unchecked="litert", limits={"load_timeout": 30, "run_timeout": 10}, timeout=90)
    assert summary.clean, _report(summary)
    source = MODELS / "deeplabv3_mnv2_dm05_pascal_quant.tflite"
    path = edit(source, tmp_path / "m.tflite", _zero_scale_on_add)
    runner = harness.ChildRunner()
    try:
        result = runner.run({"path": str(path), "unchecked": "litert", "seed_model": str(source)}, timeout=90)
    finally:
        runner.close()
    assert result["outcome"] == "error" and result["error"] == "WorkerCrashedError", result
    assert "SIGABRT" in result["message"]


def _zero_scale_on_add(model, schema):
    import numpy as np

    sg, op = first_op(model, 0)  # ADD
    sg.tensors[int(op.outputs[0])].quantization.scale = np.array([0.0], np.float32)
