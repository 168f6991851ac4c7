"""Which victims a preemption picks (design §9), driven through the real scheduling cycle."""

import pytest

from nodes.agent.topology import TOPOLOGY_LABEL
from scheduling.cycle.run import run_cycle
from scheduling.models import Task
from tests.factories import make_node, make_task
from tests.scheduling.preemption.conftest import placed_task, set_preempt_stage, statuses


def attempt_of(task: Task):
    return Task.objects.select_related("attempt").get(id=task.id).attempt


def filler(tenant, node, gpus):
    """Work that can never be a victim, occupying the cards a test does not want freed."""
    return placed_task(tenant=tenant, node=node, gpus=gpus, priority=0, preemptible=False)


def test_only_the_minimal_prefix_is_preempted(tenant, running_stage):
    node = make_node(cards=8)
    low = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=10)
    mid = placed_task(tenant=tenant, node=node, gpus=[4, 5], priority=20)
    top = placed_task(tenant=tenant, node=node, gpus=[6, 7], priority=30)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=4)

    cycle = run_cycle()

    assert statuses(low, mid, top, urgent) == ["preempting", "running", "running", "pending"]
    assert cycle.preempting == 1 and cycle.bound == 0
    attempt = attempt_of(urgent)
    assert attempt.code == "PreemptionPending"
    assert attempt.extra["preemption"] == {"node": node.name, "victims": [low.id], "lost": []}
    assert f"task {low.id} (priority 10)" in attempt.message


def test_fewest_victims_wins_over_a_smaller_priority_sum(tenant, running_stage):
    two_victims = make_node(cards=8)
    cheap = [placed_task(tenant=tenant, node=two_victims, gpus=[0, 1], priority=5),
             placed_task(tenant=tenant, node=two_victims, gpus=[2, 3], priority=5)]
    filler(tenant, two_victims, [4, 5, 6, 7])
    one_victim = make_node(cards=8)
    dear = placed_task(tenant=tenant, node=one_victim, gpus=[0, 1, 2, 3], priority=40)
    filler(tenant, one_victim, [4, 5, 6, 7])
    urgent = make_task(tenant=tenant, priority=90, gpu_required=4)

    run_cycle()

    assert statuses(*cheap, dear) == ["running", "running", "preempting"]
    assert attempt_of(urgent).extra["preemption"]["node"] == one_victim.name


def test_smaller_priority_sum_wins_over_node_id(tenant, running_stage):
    first = make_node(cards=8)
    dearer = placed_task(tenant=tenant, node=first, gpus=[0, 1, 2, 3], priority=30)
    filler(tenant, first, [4, 5, 6, 7])
    second = make_node(cards=8)
    cheaper = placed_task(tenant=tenant, node=second, gpus=[0, 1, 2, 3], priority=20)
    filler(tenant, second, [4, 5, 6, 7])
    make_task(tenant=tenant, priority=90, gpu_required=4)

    run_cycle()

    assert statuses(dearer, cheaper) == ["running", "preempting"]


def test_node_id_breaks_the_last_tie(tenant, running_stage):
    victims = []
    for _ in range(2):
        node = make_node(cards=8)
        filler(tenant, node, [4, 5, 6, 7])
        victims.append(placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=20))
    make_task(tenant=tenant, priority=90, gpu_required=4)

    run_cycle()

    assert statuses(*victims) == ["preempting", "running"]


def test_nobody_is_preempted_when_all_victims_would_not_be_enough(tenant, running_stage):
    node = make_node(cards=8)
    small = [placed_task(tenant=tenant, node=node, gpus=[0], priority=10),
             placed_task(tenant=tenant, node=node, gpus=[1, 2], priority=10)]
    filler(tenant, node, [3, 4, 5, 6, 7])
    urgent = make_task(tenant=tenant, priority=90, gpu_required=4)

    cycle = run_cycle()

    assert statuses(*small) == ["running", "running"]
    assert cycle.preempting == 0 and cycle.failed == 1
    attempt = attempt_of(urgent)
    assert attempt.code == "InsufficientResources"
    assert "no preemption victims found" in attempt.message
    assert "1 node: all 2 eligible victims would not be enough (Insufficient GPU)" in attempt.message
    assert attempt.extra["preemption"]["node_reasons"] == {
        node.name: "all 2 eligible victims would not be enough (Insufficient GPU)"}


def test_lowest_priority_goes_first_then_the_youngest_then_the_lowest_id(tenant, running_stage):
    node = make_node(cards=8)
    filler(tenant, node, [0, 1])
    older = placed_task(tenant=tenant, node=node, gpus=[2, 3], priority=10, age_seconds=600)
    younger = placed_task(tenant=tenant, node=node, gpus=[4, 5], priority=10, age_seconds=60)
    lower = placed_task(tenant=tenant, node=node, gpus=[6, 7], priority=5, age_seconds=6000)
    make_task(tenant=tenant, priority=90, gpu_required=2)
    run_cycle()
    assert statuses(lower, younger, older) == ["preempting", "running", "running"]

    make_task(tenant=tenant, priority=91, gpu_required=2)
    run_cycle()
    assert statuses(younger, older) == ["preempting", "running"]


def test_the_lowest_id_goes_first_among_equals(tenant, running_stage):
    node = make_node(cards=8)
    filler(tenant, node, [0, 1, 2, 3])
    first = placed_task(tenant=tenant, node=node, gpus=[4, 5], priority=10)
    second = placed_task(tenant=tenant, node=node, gpus=[6, 7], priority=10)
    Task.objects.filter(id=second.id).update(created_at=first.created_at)
    make_task(tenant=tenant, priority=90, gpu_required=2)

    run_cycle()

    assert statuses(first, second) == ["preempting", "running"]


@pytest.mark.parametrize(
    ("victim_fields", "preempted"),
    [
        ({}, True),
        ({"type": "inference"}, False),
        ({"preemptible": False}, False),
        ({"priority": 50}, False),
        ({"status": "scheduled"}, False),
    ],
    ids=["eligible", "inference-is-never-a-victim", "not-preemptible", "equal-priority", "state-not-allowed"],
)
def test_each_eligibility_rule_alone_blocks_the_victim(tenant, running_stage, victim_fields, preempted):
    node = make_node(cards=8)
    filler(tenant, node, [4, 5, 6, 7])
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], **{"priority": 40, **victim_fields})
    make_task(tenant=tenant, priority=50, gpu_required=4)

    run_cycle()

    assert Task.objects.get(id=victim.id).status == ("preempting" if preempted else victim.status)


@pytest.mark.parametrize(
    ("stage", "preempted"),
    [("disabled", set()), ("running", {"running"}), ("scheduled", {"running", "scheduled"})],
)
def test_preempt_stage_decides_which_states_may_be_evicted(tenant, stage, preempted):
    set_preempt_stage(stage)
    victims = {}
    for status in ("scheduled", "running"):
        node = make_node(cards=4)
        victims[status] = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=10, status=status)
        # One preemptor per node, so each victim can only be chosen for its own.
        make_task(tenant=tenant, priority=90, gpu_required=4)

    cycle = run_cycle()

    now = {status: Task.objects.get(id=task.id).status for status, task in victims.items()}
    assert {status for status, current in now.items() if current == "preempting"} == preempted
    assert cycle.preempting == len(preempted)


def test_disabled_preemption_leaves_the_failure_as_it_was(tenant):
    set_preempt_stage("disabled")
    node = make_node(cards=4)
    placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=10)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=4)

    run_cycle()

    attempt = attempt_of(urgent)
    assert attempt.code == "InsufficientResources"
    assert "preemption" not in attempt.extra and "no preemption victims" not in attempt.message


def test_training_never_preempts(tenant, running_stage):
    node = make_node(cards=4)
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=10)
    trainer = make_task(tenant=tenant, type="training", priority=90, gpu_required=4)

    run_cycle()

    assert statuses(victim, trainer) == ["running", "pending"]
    assert attempt_of(trainer).code == "InsufficientResources"


def test_inference_may_preempt(tenant, running_stage):
    node = make_node(cards=4)
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=10)
    make_task(tenant=tenant, type="inference", priority=90, gpu_required=4)

    run_cycle()

    assert statuses(victim) == ["preempting"]


def test_no_tenant_eligible_gpu_does_not_trigger_preemption(tenant, other_tenant, running_stage):
    node = make_node(cards=1)
    shard = {"card": 0, "memory_limit_mb": 10000, "compute_percent": 10}
    victim = placed_task(tenant=other_tenant, node=node, shard=shard, gpu_memory_mb=10000, priority=10)
    fractional = make_task(tenant=tenant, priority=90, gpu_memory_mb=10000)

    run_cycle()

    assert statuses(victim, fractional) == ["running", "pending"]
    assert attempt_of(fractional).code == "NoTenantEligibleGPU"


def test_quota_exceeded_does_not_trigger_preemption(tenant, other_tenant, running_stage):
    tenant.gpu_quota = 2
    tenant.save()
    node = make_node(cards=4)
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1], priority=10)
    filler(other_tenant, node, [2, 3])
    over_quota = make_task(tenant=tenant, priority=90, gpu_required=2)

    run_cycle()

    assert statuses(victim, over_quota) == ["running", "pending"]
    assert attempt_of(over_quota).code == "QuotaExceeded"


@pytest.mark.parametrize(
    ("victim_tenant", "keeper_tenant", "preempted"),
    [("own", "own", True), ("other", "own", True), ("own", "other", False)],
)
def test_the_preemptors_sharing_boundary_holds_after_eviction(tenant, other_tenant, running_stage, victim_tenant,
                                                                keeper_tenant, preempted):
    """A fractional preemptor may only land on a card whose remaining occupants may share with its tenant."""
    tenants = {"own": tenant, "other": other_tenant}
    node = make_node(cards=1, memory_mb=81920)  # 73,728 MB after the 10 % reserve
    victim = placed_task(tenant=tenants[victim_tenant], node=node, gpu_memory_mb=40000, priority=10,
                         shard={"card": 0, "memory_limit_mb": 40000, "compute_percent": 40})
    placed_task(tenant=tenants[keeper_tenant], node=node, gpu_memory_mb=30000, priority=0, preemptible=False,
                shard={"card": 0, "memory_limit_mb": 30000, "compute_percent": 30})
    fractional = make_task(tenant=tenant, priority=90, gpu_memory_mb=20000)

    run_cycle()

    assert statuses(victim) == ["preempting" if preempted else "running"]
    if not preempted:
        attempt = attempt_of(fractional)
        assert attempt.code == "InsufficientResources"
        assert "no card shareable with the tenant" in attempt.message


def test_gpu_model_label_limits_the_nodes_a_plan_may_use(tenant, running_stage):
    v100 = make_node(cards=4, model="V100")
    cheap = placed_task(tenant=tenant, node=v100, gpus=[0, 1, 2, 3], priority=5)
    a100 = make_node(cards=4, model="A100")
    dear = placed_task(tenant=tenant, node=a100, gpus=[0, 1, 2, 3], priority=30)
    picky = make_task(tenant=tenant, priority=90, gpu_required=4, labels={"gpu-model": "a100|h100"})

    run_cycle()

    assert statuses(cheap, dear) == ["running", "preempting"]
    assert attempt_of(picky).extra["preemption"]["node"] == a100.name


@pytest.mark.parametrize(("labels", "evicted"), [({"nvlink": "required"}, {"p10", "p20"}), ({}, {"p10"})],
                         ids=["nvlink-required", "no-nvlink-label"])
def test_nvlink_required_holds_for_the_freed_cards(tenant, running_stage, labels, evicted):
    """NVLink domains {0, 1} and {2, 3}: freeing card 2 gives two free cards, but not inside one domain."""
    node = make_node(cards=4, numa=[0, 0, 1, 1], labels={TOPOLOGY_LABEL: "nv=0-1,2-3;numa=0:0,1:0,2:1,3:1"})
    victims = {"p20": placed_task(tenant=tenant, node=node, gpus=[0], priority=20),
               "p10": placed_task(tenant=tenant, node=node, gpus=[2], priority=10)}
    filler(tenant, node, [3])
    make_task(tenant=tenant, priority=90, gpu_required=2, labels=labels)

    run_cycle()

    assert {name for name, task in victims.items() if statuses(task) == ["preempting"]} == evicted


def test_nodes_no_eviction_can_cure_are_named_and_skipped(tenant, running_stage):
    v100 = make_node(cards=4, model="V100")
    victim = placed_task(tenant=tenant, node=v100, gpus=[0, 1, 2, 3], priority=5)
    a100 = make_node(cards=4, model="A100")
    filler(tenant, a100, [0, 1, 2, 3])
    picky = make_task(tenant=tenant, priority=90, gpu_required=4, labels={"gpu-model": "A100"})

    run_cycle()

    assert statuses(victim) == ["running"]
    assert attempt_of(picky).extra["preemption"]["node_reasons"] == {
        v100.name: "preemption would not help (GPU model mismatch)",
        a100.name: "no eligible victims",
    }
