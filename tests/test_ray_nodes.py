"""The warm Pool across several Ray nodes: SIMULATED nodes, all on this machine (ray.cluster_utils.Cluster, 1 CPU
each), so what is checked is placement and shipping (the model's bytes reach every node, one actor per node with
spread=True), not speed. Its own Ray: it runs after (never beside) test_ray.py's local one."""

from __future__ import annotations

import pytest

import edgeaccel

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'edgeaccel[ray]')")

from conftest import IMAGES, MODELS, needs  # noqa: E402

MOBILENET = MODELS / "mobilenet_v2_1.0_224_quant.tflite"
LABELS = MODELS / "imagenet_labels.txt"

pytestmark = [pytest.mark.slow,  # slow tier: Ray clusters
              pytest.mark.shared, needs("models/mobilenet_v2_1.0_224_quant.tflite"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture
def two_nodes():
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        pytest.skip("another Ray is connected in this process; a simulated cluster needs its own")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_a_spread_pool_puts_one_actor_on_each_simulated_node_and_answers_as_in_process(two_nodes):
    from edgeaccel.ray import Pool

    names = ["bird", "cat", "grace_hopper"] * 3
    with edgeaccel.load(MOBILENET, task="classify", labels=LABELS, threads=1) as model:
        want = [model.predict(IMAGES / f"{n}.png").top.label for n in names]
    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    with Pool(MOBILENET, task="classify", labels=LABELS, actors=2, spread=True, batch_size=2) as pool:
        assert {a["node_id"] for a in pool.actors} == nodes and len(nodes) == 2
        assert [r.top.label for r in pool.predict_batch([IMAGES / f"{n}.png" for n in names])] == want
