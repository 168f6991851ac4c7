"""Preemption frees cards only in the preemptor's card group (design §9, §15.3): on a node with cards of several
vendors, work on cards the preemptor could never use is never evicted — in the cycle, the preemption-plan endpoint
and for whole and fractional victims alike."""

from nodes.models import GPU
from scheduling.cycle.run import run_cycle
from scheduling.models import Task
from tests.factories import make_node, make_task
from tests.scheduling.preemption.conftest import placed_task, statuses


def nvidia_and_ascend_node(**fields):
    """4 Ascend cards (the node's type: detection finds Ascend first) and 4 NVIDIA cards, both numbered 0–3."""
    node = make_node(gpu_type="ascend", cards=4, model="910B", memory_mb=65536, **fields)
    GPU.objects.bulk_create(GPU(node=node, index=index, uuid=f"{node.name}-nv-{index}", type="nvidia", model="A100",
                                memory_total_mb=81920) for index in range(4))
    node.gpu_total = 8
    node.save(update_fields=["gpu_total"])
    return node


def test_the_ascend_task_is_not_evicted_for_an_nvidia_preemptor(tenant, running_stage):
    node = nvidia_and_ascend_node()
    ascend = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=5, card_type="ascend",
                         gpu_type="ascend")
    nvidia = placed_task(tenant=tenant, node=node, gpus=[0, 1], priority=10, card_type="nvidia", gpu_type="nvidia")
    urgent = make_task(tenant=tenant, priority=90, gpu_required=4, gpu_type="nvidia")

    cycle = run_cycle()

    assert statuses(ascend, nvidia, urgent) == ["running", "preempting", "pending"]
    assert cycle.preempting == 1
    attempt = Task.objects.select_related("attempt").get(id=urgent.id).attempt
    assert attempt.extra["preemption"]["victims"] == [nvidia.id]


def test_the_plan_endpoint_names_only_the_victim_of_the_preemptors_type(admin_client, tenant, running_stage):
    node = nvidia_and_ascend_node()
    placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=5, card_type="ascend", gpu_type="ascend")
    nvidia = placed_task(tenant=tenant, node=node, gpus=[0, 1], priority=10, card_type="nvidia", gpu_type="nvidia")
    urgent = make_task(tenant=tenant, priority=90, gpu_required=4, gpu_type="nvidia")

    plan = admin_client.get(f"/api/v1/tasks/{urgent.id}/preemption-plan").json()

    assert plan["victims"] == [{"task": nvidia.id, "priority": 10}]


def test_only_victims_of_its_type_can_help_so_no_plan_is_made(tenant, running_stage):
    node = nvidia_and_ascend_node()
    ascend = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=5, card_type="ascend",
                         gpu_type="ascend")
    keeps = placed_task(tenant=tenant, node=node, gpus=[0, 1], priority=0, preemptible=False, card_type="nvidia",
                        gpu_type="nvidia")
    urgent = make_task(tenant=tenant, priority=90, gpu_required=4, gpu_type="nvidia")

    run_cycle()

    assert statuses(ascend, keeps, urgent) == ["running", "running", "pending"]
    assert "no eligible victim holds cards of its type" in Task.objects.get(id=urgent.id).attempt.message


def test_a_shard_on_a_card_of_the_other_vendor_is_not_evicted_for_a_fractional_task(tenant, running_stage):
    node = nvidia_and_ascend_node()
    # Every NVIDIA card's memory is taken: by a low-priority shard on card 0 and by work that stays elsewhere.
    ascend_shard = placed_task(tenant=tenant, node=node, priority=1, card_type="ascend", gpu_type="ascend",
                               gpu_memory_mb=60000, shard={"card": 0, "memory_limit_mb": 60000})
    nvidia_shard = placed_task(tenant=tenant, node=node, priority=10, card_type="nvidia", gpu_type="nvidia",
                               gpu_memory_mb=70000, shard={"card": 0, "memory_limit_mb": 70000})
    for index in (1, 2, 3):
        placed_task(tenant=tenant, node=node, gpus=[index], priority=0, preemptible=False, card_type="nvidia",
                    gpu_type="nvidia")
    urgent = make_task(tenant=tenant, priority=90, gpu_type="nvidia", gpu_memory_mb=40000)

    run_cycle()

    assert statuses(ascend_shard, nvidia_shard, urgent) == ["running", "preempting", "pending"]
