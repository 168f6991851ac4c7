"""The preemption plan (issue 17): what the preempt PostFilter would do now, evicting nobody."""

import uuid

import pytest

from scheduling.cache.snapshot_builder import build_snapshot, task_info_from_task
from scheduling.cycle.run import run_cycle
from scheduling.models import PluginConfig, Task
from scheduling.what_if import preemption_plan as plan_module
from scheduling.what_if.preemption_plan import FITS_NOW, NOT_PENDING, preemption_plan
from tests.factories import make_node, make_task
from tests.scheduling.preemption.conftest import placed_task, set_preempt_stage, statuses


@pytest.fixture(autouse=True)
def _running_stage(db):
    set_preempt_stage("running")


def _attempt(task):
    return Task.objects.select_related("attempt").get(id=task.id).attempt


def _full_nodes(tenant, other_tenant):
    """Two full nodes, the only room for an 8-card task node-b's two low-priority tasks (node-a's task is not
    preemptible)."""
    node_a = make_node(cards=8, name="node-a")
    dear = placed_task(tenant=tenant, node=node_a, gpus=list(range(8)), priority=5, preemptible=False)
    node_b = make_node(cards=8, name="node-b")
    own = placed_task(tenant=tenant, node=node_b, gpus=[0, 1, 2, 3], priority=10, name="own-batch")
    others = placed_task(tenant=other_tenant, node=node_b, gpus=[4, 5, 6, 7], priority=20, name="secret-batch")
    return dear, own, others


def test_the_plan_is_what_the_cycle_then_does(tenant, other_tenant):
    dear, own, others = _full_nodes(tenant, other_tenant)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)

    plan = plan_of(urgent.id, viewer_tenant_id=None)

    assert statuses(dear, own, others, urgent) == ["running", "running", "running", "pending"]
    assert plan["node"] == "node-b"
    assert plan["victims"] == [{"task": own.id, "priority": 10}, {"task": others.id, "priority": 20}]
    assert plan["frees"]["gpus"] == 8 and plan["frees"]["cards"] == list(range(8))

    run_cycle()

    done = _attempt(urgent).extra["preemption"]
    assert done["node"] == plan["node"]
    assert sorted(done["victims"]) == sorted(victim["task"] for victim in plan["victims"])
    assert statuses(own, others) == ["preempting", "preempting"]


def test_a_tenant_sees_only_the_count_and_priorities_of_other_tenants_victims(tenant, other_tenant):
    _, own, _ = _full_nodes(tenant, other_tenant)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)

    plan = plan_of(urgent.id, viewer_tenant_id=tenant.id)

    assert plan["victims"] == [{"task": own.id, "priority": 10}, {"task": None, "priority": 20}]
    assert plan["other_tenants_victims"] == 1
    assert "secret-batch" not in str(plan)


def test_victims_already_stopping_for_the_task_are_shown_as_stopping(tenant, other_tenant):
    _, own, others = _full_nodes(tenant, other_tenant)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)
    run_cycle()

    plan = plan_of(urgent.id, viewer_tenant_id=None)

    assert plan["stopping"] is True and plan["node"] == "node-b"
    assert sorted(victim["task"] for victim in plan["victims"]) == sorted([own.id, others.id])


def test_no_eviction_would_help_says_why_per_node(tenant):
    node = make_node(cards=8)
    placed_task(tenant=tenant, node=node, gpus=list(range(8)), priority=95)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)

    plan = plan_of(urgent.id, viewer_tenant_id=tenant.id)

    assert plan["code"] == "InsufficientResources"
    assert "no preemption victims found" in plan["message"]
    # A tenant reads counts by reason, never node names (issue 27 item 5); staff read each node's reason.
    assert plan["node_reason_counts"] == {"no eligible victims": 1} and "node_reasons" not in plan
    staff = plan_of(urgent.id, viewer_tenant_id=None)
    assert staff["node_reasons"] == {node.name: "no eligible victims"}


@pytest.mark.parametrize(("setup", "expected"), [
    ("training", "Training tasks never preempt."),
    ("disabled", "Preemption is disabled."),
])
def test_when_preemption_does_not_apply_the_plan_says_so(tenant, setup, expected):
    node = make_node(cards=8)
    placed_task(tenant=tenant, node=node, gpus=list(range(8)), priority=10)
    if setup == "disabled":
        PluginConfig.objects.filter(name="preempt").update(extra={"preempt_stage": "disabled"})
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8, type="training" if setup == "training" else "batch")

    plan = plan_of(urgent.id, viewer_tenant_id=None)

    assert plan["code"] == "InsufficientResources"
    assert plan["message"].endswith(expected)


def test_a_task_that_fits_needs_no_eviction(tenant):
    make_node(cards=8, name="roomy")
    task = make_task(tenant=tenant, priority=90, gpu_required=2)

    plan = plan_of(task.id, viewer_tenant_id=None)

    assert plan["code"] == FITS_NOW and "roomy" in plan["message"]


def test_only_a_pending_task_has_a_plan(tenant):
    node = make_node(cards=8)
    running = placed_task(tenant=tenant, node=node, gpus=[0], priority=90)

    assert plan_of(running.id, viewer_tenant_id=None)["code"] == NOT_PENDING


def test_a_tenant_never_reads_the_name_of_a_node_dedicated_to_another_tenant(tenant, other_tenant):
    """issue 27 item 5: the plan's per-node reasons named nodes dedicated to other tenants."""
    dedicated = make_node(cards=8, name="secret-dedicated-node", dedicated_tenant=other_tenant)
    placed_task(tenant=other_tenant, node=dedicated, gpus=list(range(8)), priority=10)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)

    plan = plan_of(urgent.id, viewer_tenant_id=tenant.id)

    assert "secret-dedicated-node" not in str(plan)


def plan_of(task_id: int, *, viewer_tenant_id: int | None) -> dict:
    """The plan as the task page and the API ask for it, with the task as read now."""
    return preemption_plan(task=Task.objects.get(id=task_id), viewer_tenant_id=viewer_tenant_id)


def plan_on_a_fresh_snapshot(task_id: int) -> dict:
    """The task's plan computed on a snapshot of the whole cluster read now, outside any generation."""
    task = task_info_from_task(Task.objects.get(id=task_id))
    return plan_module._plan(task, None, cluster=plan_module._cluster(build_snapshot()))


def _looks(monkeypatch) -> list[int]:
    """One entry per look the plans take at the cluster (a generation's snapshot)."""
    looks = []
    take = plan_module._snapshots.snapshot
    monkeypatch.setattr(plan_module._snapshots, "snapshot", lambda config: looks.append(1) or take(config))
    return looks


def _generations(monkeypatch) -> list[str]:
    """The cycle generation under the test's own control (the last one appended), not Redis's stamp: test workers
    share one Redis, and another worker's cycle would start a new generation in the middle of the test."""
    generations = [f"cycle-{uuid.uuid4()}"]
    monkeypatch.setattr(plan_module, "_cycle_generation", lambda: generations[-1])
    return generations


def test_a_plan_is_computed_once_per_cycle_for_each_viewer(tenant, other_tenant, monkeypatch):
    """issue 27 item 4: every call built a snapshot of the whole cluster (~1 s at 5,000 nodes)."""
    _full_nodes(tenant, other_tenant)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)
    builds = _looks(monkeypatch)
    generation = _generations(monkeypatch)

    first = plan_of(urgent.id, viewer_tenant_id=None)
    assert plan_of(urgent.id, viewer_tenant_id=None) == first
    assert plan_of(urgent.id, viewer_tenant_id=tenant.id)["victims"][1]["task"] is None
    assert len(builds) == 1, "the viewers' plans share the generation's snapshot"

    generation.append(f"cycle-{uuid.uuid4()}")
    assert plan_of(urgent.id, viewer_tenant_id=None) == first
    assert len(builds) == 2

    Task.objects.filter(id=urgent.id).update(status="stopped")
    assert plan_of(urgent.id, viewer_tenant_id=None)["code"] == NOT_PENDING


def test_the_plans_of_a_generation_share_its_snapshot_and_equal_plans_of_their_own(tenant, other_tenant,
                                                                                   monkeypatch):
    """issue 29 item 3: each newly viewed pending task built a snapshot of the whole cluster for its plan."""
    _full_nodes(tenant, other_tenant)
    urgent = [make_task(tenant=tenant, priority=90, gpu_required=8, name=f"urgent-{index}") for index in range(3)]
    fits = make_task(tenant=tenant, priority=90, gpu_required=0, name="fits")
    own = [plan_on_a_fresh_snapshot(task.id) for task in [*urgent, fits]]
    builds = _looks(monkeypatch)
    _generations(monkeypatch)

    shared = [plan_of(task.id, viewer_tenant_id=None) for task in [*urgent, fits]]

    assert shared == own and "node" in shared[0] and shared[-1]["code"] == FITS_NOW
    assert len(builds) == 1
    monkeypatch.setattr(plan_module, "GENERATION_SECONDS", 0.0)
    plan_of(make_task(tenant=tenant, priority=90, gpu_required=8, name="later").id,
                    viewer_tenant_id=None)
    plan_of(make_task(tenant=tenant, priority=90, gpu_required=8, name="later2").id,
                    viewer_tenant_id=None)
    assert len(builds) == 3, "a generation the scheduler does not end is re-read after GENERATION_SECONDS"


def test_without_any_cycle_the_plans_still_share_a_snapshot_for_a_generations_time(tenant, other_tenant,
                                                                                   monkeypatch):
    """issue 47 item 4: with no scheduler cycling, every view of a pending task's page read the whole cluster."""
    _full_nodes(tenant, other_tenant)
    urgent = [make_task(tenant=tenant, priority=90, gpu_required=8, name=f"urgent-{index}") for index in range(3)]
    own = [plan_on_a_fresh_snapshot(task.id) for task in urgent]
    builds = _looks(monkeypatch)
    monkeypatch.setattr(plan_module, "_cycle_generation", lambda: None)

    shared = [plan_of(task.id, viewer_tenant_id=None) for task in urgent]

    assert shared == own and "node" in shared[0]
    assert len(builds) == 1, "the plans of one generation's time share one snapshot"
    monkeypatch.setattr(plan_module, "GENERATION_SECONDS", 0.0)
    assert plan_of(urgent[0].id, viewer_tenant_id=None) == own[0]
    assert len(builds) == 2, "without a cycle, the snapshot is read again after GENERATION_SECONDS"
