"""Real model names and mixed-vendor nodes end to end (design §15.2, §15.3): a task takes cards of its type and
gpu-model only, of one type when it names none, in filter, card choice (Reserve) and the bind re-check."""

import random

import pytest

from nodes.models import GPU, Node
from scheduling import lifecycle
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.framework.cards import ChosenCards
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.models import SchedulingAttempt, Task
from scheduling.plugins import gpu_filter
from scheduling.plugins.resource_prefilter import INSUFFICIENT_GPU
from tests.factories import make_node, make_task
from tests.scheduling.bind.single import bind_task

pytestmark = pytest.mark.django_db


def _mixed_node(name: str = "mixed") -> Node:
    """2 NVIDIA + 2 Ascend cards, each vendor numbering from 0 (as lifecycle's heartbeat stores them)."""
    node = make_node(name=name, cards=2, model="NVIDIA A100-SXM4-80GB")
    GPU.objects.bulk_create(GPU(node=node, index=index, uuid=f"{name}-npu-{index}", type="ascend",
                                model="Ascend 910B", memory_total_mb=65536) for index in range(2))
    Node.objects.filter(id=node.id).update(gpu_total=4)
    return node


def _placed(task: Task) -> tuple:
    task.refresh_from_db()
    return task.status, task.card_type, sorted(task.gpus)


def test_an_ascend_two_card_task_gets_exactly_the_two_ascend_cards_of_a_mixed_node(tenant):
    node = _mixed_node()
    task = make_task(tenant=tenant, gpu_type="ascend", gpu_required=2)

    run_cycle(rng=random.Random(1))

    assert _placed(task) == (lifecycle.SCHEDULED, "ascend", [0, 1])
    work = Task.objects.get(id=task.id)
    assert work.node_id == node.id
    nvidia_next = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=2)
    run_cycle(rng=random.Random(1))
    assert _placed(nvidia_next) == (lifecycle.SCHEDULED, "nvidia", [0, 1])


def test_an_nvidia_three_card_task_does_not_fit_a_node_with_two_nvidia_and_two_ascend_cards(tenant):
    _mixed_node()
    task = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=3)

    run_cycle()

    assert _placed(task)[0] == lifecycle.PENDING
    attempt = SchedulingAttempt.objects.get(task=task)
    assert attempt.code == reasons.INSUFFICIENT_RESOURCES
    assert INSUFFICIENT_GPU in attempt.message


def test_a_task_without_gpu_type_takes_cards_of_one_type_never_a_mix(tenant):
    _mixed_node()
    three = make_task(tenant=tenant, gpu_required=3)
    two = make_task(tenant=tenant, gpu_required=2, priority=40)

    run_cycle(rng=random.Random(1))

    assert _placed(three)[0] == lifecycle.PENDING
    status, card_type, cards = _placed(two)
    assert (status, cards) == (lifecycle.SCHEDULED, [0, 1]) and card_type in ("nvidia", "ascend")


def test_the_bind_recheck_rechooses_only_cards_of_the_tasks_type(tenant):
    from scheduling.framework.framework import Framework
    from scheduling.plugins import build_plugin_set

    node = _mixed_node()
    snapshot = build_snapshot()
    row = Task.objects.filter(id=make_task(tenant=tenant, gpu_type="ascend", gpu_required=1).id)
    task = task_info_from_row(row.values_list(*TASK_INFO_FIELDS).get())
    framework = Framework(build_plugin_set([]), SchedulerConfig())
    # The snapshot's choice went stale: ascend card 0 was taken meanwhile.
    make_task(tenant=tenant, gpu_type="ascend", gpu_required=1, status="running", node=node, gpus=[0],
              card_type="ascend")

    outcome = bind_task(task, snapshot.node(node.id), ChosenCards([0], "ascend"), config=SchedulerConfig(),
                        reserve=framework.reserve)

    assert outcome.bound and outcome.cards == (1,)
    assert _placed(Task.objects.get(id=task.id)) == (lifecycle.SCHEDULED, "ascend", [1])


def test_a_gpu_model_label_a100_binds_on_a_node_whose_cards_say_nvidia_a100_sxm4_80gb(tenant, tenant_client):
    make_node(name="h100", cards=8, model="NVIDIA H100 80GB HBM3")
    a100 = make_node(name="a100", cards=8, model="NVIDIA A100-SXM4-80GB")
    make_node(name="a10", cards=8, model="NVIDIA A10")
    response = tenant_client.post("/api/v1/tasks", {"name": "picky", "gpu_type": "nvidia", "gpu_required": 2,
                                                    "labels": {"gpu-model": "A100"}}, format="json")
    assert response.status_code == 201

    run_cycle(rng=random.Random(1))

    task = Task.objects.get(id=response.json()["id"])
    assert (task.status, task.node_id) == (lifecycle.SCHEDULED, a100.id)
    reason_of = {entry["node"]: entry["reason"] for entry in SchedulingAttempt.objects.get(task=task).node_entries()}
    assert reason_of == {"h100": gpu_filter.GPU_MODEL_MISMATCH, "a10": gpu_filter.GPU_MODEL_MISMATCH, "a100": None}


def test_a_gpu_model_label_takes_cards_of_the_matching_model_on_a_node_with_two_models(tenant):
    node = make_node(name="two-models", cards=2, model="NVIDIA A10")
    GPU.objects.bulk_create(GPU(node=node, index=index, uuid=f"big-{index}", type="nvidia",
                                model="NVIDIA A100-SXM4-80GB", memory_total_mb=81920) for index in (2, 3))
    Node.objects.filter(id=node.id).update(gpu_total=4)
    task = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=2, labels={"gpu-model": "a100"})

    run_cycle()

    assert _placed(task) == (lifecycle.SCHEDULED, "nvidia", [2, 3])


def test_the_api_refuses_a_gpu_model_label_that_names_no_model(tenant_client):
    response = tenant_client.post("/api/v1/tasks", {"name": "x", "labels": {"gpu-model": "|"}}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "labels"
    assert not Task.objects.exists()
