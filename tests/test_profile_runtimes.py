"""`edgeaccel profile`'s collectors on the real runtimes: ONNX Runtime's session profiler, OpenVINO's performance
counters, LiteRT's operator list and delegated partitions; the per-op sums against the whole-model time."""

from __future__ import annotations

import pytest

from conftest import MODELS
from onnx_models import small_conv

from edgeaccel.profiling.collect import collect_whole_model, collector_for
from edgeaccel.profiling.profile import profile_model

pytestmark = pytest.mark.shared
ONNX_MODEL = MODELS / "mobilenet_v2_1.0_224_quant.onnx"
# CI machines are shared and noisy: generous bounds here; README states what was measured (0.9-1.0)
COVERAGE = (0.5, 1.5)


def one(model, executor: str, runs: int = 5, **kwargs):
    profile = profile_model(model, executor=executor, runs=runs, warmup=2, **kwargs)
    assert len(profile.executors) == 1 and not profile.failed
    return profile.executors[0]


@pytest.fixture(scope="module")
def ort_profile():
    return one(ONNX_MODEL, "onnxruntime")


@pytest.fixture(scope="module")
def ov_profile():
    return one(ONNX_MODEL, "openvino")


def test_onnxruntime_per_node_times_add_up_to_the_whole_model(ort_profile):
    p = ort_profile
    assert p.runtime == "onnxruntime" and p.per_op_available
    assert COVERAGE[0] < p.coverage < COVERAGE[1], p.coverage
    assert all(op.median_ms is not None and op.runs == p.runs for op in p.ops)
    assert {op.device for op in p.ops} == {"CPUExecutionProvider"}
    assert "QLinearConv" in {op.op_type for op in p.ops}  # ORT fused the QDQ convolutions
    assert sum(op.share for op in p.ops) == pytest.approx(1.0)
    assert any(op.output_bytes for op in p.ops)  # ORT tells each node's output size
    assert p.devices[0].device == "CPUExecutionProvider" and p.devices[0].op_share == 1.0
    assert p.load_s > 0 and p.peak_rss_mb and p.peak_rss_mb > 10
    # the trace's per-run records are the runs timed: one event per node per run
    assert len(p.records) == p.runs and all(len(r.ops) == len(p.ops) for r in p.records)


def test_openvino_counters_add_up_to_the_whole_model(ov_profile):
    p = ov_profile
    assert p.runtime == "openvino" and p.per_op_available
    assert COVERAGE[0] < p.coverage < COVERAGE[1], p.coverage
    assert p.not_executed > 0  # OpenVINO lists the nodes it fused away (OPTIMIZED_OUT, NOT_RUN) and says so
    assert p.graph["execution_devices"] == ["CPU"] and {op.device for op in p.ops} == {"CPU"}
    assert all(op.kernel for op in p.ops)  # exec_type: the kernel OpenVINO chose
    assert "Convolution" in {op.op_type for op in p.ops}


def test_litert_lists_operators_and_partitions_without_inventing_times():
    from edgeaccel.formats import tflite

    model = MODELS / "mobilenet_v1_0.25_128_quant.tflite"
    p = one(model, "litert", runs=3)
    assert not p.per_op_available and "no per-operator times" in p.note
    assert p.coverage is None and p.op_sum_ms is None
    assert all(op.median_ms is None and op.share is None for op in p.ops)
    assert p.whole_model_ms > 0
    parsed = tflite.parse(model.read_bytes())
    assert len(p.ops) == len(parsed.primary.operators)
    delegated = sum(part["operators"] for part in p.graph["partitions"])
    on_xnnpack = [op for op in p.ops if op.device == "XNNPACK"]
    assert 0 < delegated == len(on_xnnpack) < len(p.ops)  # XNNPACK took most, the TFLite kernels the rest
    split = {d.device: d for d in p.devices}
    assert split["XNNPACK"].ops == len(on_xnnpack) and split["XNNPACK"].time_ms is None


def test_tiny_onnx_model_named_by_onnxruntime(tmp_path):
    """Unnamed nodes get ORT's names; on OpenVINO the same model names its compiled nodes."""
    path = small_conv(tmp_path / "tiny.onnx")
    ort = one(path, "onnxruntime", runs=3)
    assert ort.per_op_available and all(op.name for op in ort.ops)
    assert {"GlobalAveragePool", "Flatten"} <= {op.op_type for op in ort.ops}
    ov = one(path, "openvino", runs=3)
    assert ov.per_op_available and "Convolution" in {op.op_type for op in ov.ops}


def test_a_runtime_without_a_collector_gives_whole_model_time_and_says_so():
    from edgeaccel.executors.onnxruntime import OnnxRuntimeExecutor
    from edgeaccel.executors.tensorflow import TensorFlowExecutor

    assert collector_for(TensorFlowExecutor) is collect_whole_model
    assert collector_for(OnnxRuntimeExecutor).__module__ == "edgeaccel.profiling.onnxruntime"


def test_a_plug_in_class_names_its_collector_or_inherits_the_built_in_ones():
    """Built-in executors name no profiling module (profiling sits above them): collect.py lists their collectors,
    and a plug-in built on one inherits its collector unless it names its own."""
    from edgeaccel.executors.litert import LiteRTExecutor
    from edgeaccel.executors.openvino import OpenVINOExecutor

    class TunedOpenVINO(OpenVINOExecutor):
        runtime = "tuned-openvino"

    class OwnCollector(LiteRTExecutor):
        runtime = "own-litert"
        profiler = "edgeaccel.profiling.collect:collect_whole_model"

    assert collector_for(TunedOpenVINO).__module__ == "edgeaccel.profiling.openvino"
    assert collector_for(OwnCollector) is collect_whole_model
    assert collector_for(LiteRTExecutor).__module__ == "edgeaccel.profiling.litert"


def test_all_matches_operators_across_runtimes(ort_profile, ov_profile):
    from edgeaccel.profiling.matching import match_ops

    matching = match_ops([ort_profile, ov_profile])
    # measured: 66 of ORT's 67 fused nodes have an OpenVINO node of the same name once suffixes are removed
    assert len(matching.rows) > len(ort_profile.ops) // 2
    key, per = matching.rows[0]
    assert set(per) == {"onnxruntime:CPU", "openvino:CPU"} and all(v is not None for v in per.values())
    # what matched nowhere is listed per executor, never dropped
    listed = {n for names in matching.unmatched.values() for n in names}
    assert listed and listed.isdisjoint({k for k, _ in matching.rows})


def test_trace_has_one_complete_event_per_operator_per_run(ort_profile, ov_profile, tmp_path):
    import json

    from edgeaccel.profiling.trace import write_trace

    path = write_trace([ort_profile, ov_profile], tmp_path / "trace.json")
    events = json.loads(path.read_text())["traceEvents"]
    for pid, p in ((1, ort_profile), (2, ov_profile)):
        ops = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e["cat"] == "op"]
        runs = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e["cat"] == "run"]
        assert len(runs) == p.runs and len(ops) == p.runs * len(p.ops)
        assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in ops + runs)
        names = [e["args"]["name"] for e in events if e["ph"] == "M" and e["pid"] == pid]
        assert p.executor in names
    ov_events = [e for e in events if e["ph"] == "X" and e["pid"] == 2 and e["cat"] == "op"]
    assert "durations only" in ov_events[0]["args"]["ts"]  # OpenVINO's laid-out start times are said so


def test_litert_partitions_of_a_model_split_between_xnnpack_and_the_tflite_kernels():
    """The traffic detector: six XNNPACK partitions around an LSTM cell and the detection post-processing."""
    p = one(MODELS / "traffic_model.tflite", "litert", runs=1)
    partitions = p.graph["partitions"]
    assert len(partitions) > 1 and {part["delegate"] for part in partitions} == {"XNNPACK"}
    on_cpu = [op for op in p.ops if op.device == "CPU (TFLite kernels)"]
    assert sum(part["operators"] for part in partitions) + len(on_cpu) == len(p.ops)  # each op in one place
    assert "TFLite_Detection_PostProcess" in {op.op_type for op in on_cpu}  # a custom op XNNPACK cannot take
