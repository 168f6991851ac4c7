"""model-locality (design §17.2, model distribution): nodes that hold the task's model and image score higher, and
the summary line says where the chosen node lacks them."""

import random

from nodes.artifacts_label import IMAGES_LABEL, MODELS_LABEL, encode_names
from scheduling.framework.framework import Framework
from scheduling.framework.registry import PluginSetting
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.plugins import build_plugin_set, default_registry
from tests.scheduling.framework.builders import make_node, make_snapshot, make_task


def framework(*settings):
    return Framework(build_plugin_set(settings, default_registry(extra_plugins=[])), SchedulerConfig())


def _holding(name: str, *, models=(), images=()):
    return make_node(name=name, labels={MODELS_LABEL: encode_names(models), IMAGES_LABEL: encode_names(images)})


def test_the_node_holding_the_model_and_image_wins_and_partial_holders_come_next():
    both = _holding("both", models=["qwen2-7b"], images=["vllm:0.6"])
    model_only = _holding("model-only", models=["qwen2-7b"])
    bare = _holding("bare")
    fw = framework(PluginSetting("spread", False))
    task = make_task(gpu_required=1, model="qwen2-7b", image="vllm:0.6")

    result = fw.schedule(task, make_snapshot(bare, model_only, both), random.Random(0))

    assert result.node.name == "both"
    scores = {node.name: result.scores[node.id]["model-locality"] for node in (both, model_only, bare)}
    assert scores == {"both": 100.0, "model-only": 50.0, "bare": 0.0}
    assert "pulled" not in result.message


def test_the_summary_line_says_what_the_chosen_node_lacks():
    bare = _holding("bare", images=["busybox:latest"])
    task = make_task(gpu_required=1, model="llama-3-8b", image="vllm")

    result = framework().schedule(task, make_snapshot(bare), random.Random(0))

    assert result.message == ("1/1 nodes are available. llama-3-8b and vllm:latest not yet on bare: pulled before it "
                              "starts.")


def test_a_task_naming_nothing_scores_alike_everywhere():
    task = make_task(gpu_required=1)
    result = framework().schedule(task, make_snapshot(_holding("a", models=["m"]), _holding("b")), random.Random(0))

    assert {scores["model-locality"] for scores in result.scores.values()} == {0.0}
    assert result.message == "2/2 nodes are available."
