"""The planner without a database: what it gives back on the node copy, and the rules no DB row can break."""

from datetime import UTC, datetime, timedelta

from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.framework.status import SUCCESS, Status
from scheduling.preemption.candidates import ActiveTask
from scheduling.preemption.planner import ineligibility, may_preempt, plan_preemption

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def active(task_id: int, **fields) -> ActiveTask:
    defaults = {
        "node_id": 1, "tenant_id": 1, "type": "batch", "priority": 10, "preemptible": True, "status": "running",
        "created_at": NOW - timedelta(seconds=task_id), "gpu_required": 0, "gpus": (), "gpu_memory_mb": 0,
        "shard_card": None, "shard_memory_mb": 0, "cpu_cores": 0.0, "memory_mb": 0,
    }
    return ActiveTask(id=task_id, **{**defaults, **fields})


def test_training_is_never_a_victim_even_if_marked_preemptible():
    preemptor = TaskInfo(id=99, tenant_id=1, priority=90)
    assert ineligibility(active(1, type="training"), preemptor=preemptor, preempt_stage="running") \
        == "training tasks are never preempted"
    assert ineligibility(active(1), preemptor=preemptor, preempt_stage="running") is None


def test_training_never_preempts():
    assert not may_preempt(TaskInfo(id=1, tenant_id=1, type="training"))
    assert may_preempt(TaskInfo(id=1, tenant_id=1, type="inference"))


def test_cpu_and_memory_of_the_victims_are_summed():
    node = NodeInfo(id=1, name="n", cpu_cores=10, cpu_percent=80.0, memory_gb=16, memory_used_mb=12000)
    victims = [active(i, cpu_cores=2.0, memory_mb=1000) for i in (1, 2, 3)]
    seen: list[tuple[float, int]] = []

    def fits_when_cpu_and_memory_allow(task: TaskInfo, freed: NodeInfo) -> Status:
        seen.append((round(freed.cpu_percent, 3), freed.memory_used_mb))
        ok = freed.cpu_percent <= 45 and freed.memory_used_mb <= 10000
        return SUCCESS if ok else Status.unschedulable("load")

    search = plan_preemption(TaskInfo(id=99, tenant_id=1, priority=90), ClusterSnapshot(nodes=[node]), victims,
                             fits_when_cpu_and_memory_allow, "running")

    assert [victim.id for victim in search.plan.victims] == [1, 2]
    assert (node.cpu_percent, node.memory_used_mb) == (80.0, 12000)  # the snapshot itself is untouched
    assert seen == [(20.0, 9000), (60.0, 11000), (40.0, 10000)]


def test_whole_and_fractional_victims_return_cards_and_card_memory():
    card0 = CardInfo(index=0, memory_total_mb=1000, memory_used_mb=900, whole_card_tasks=1, occupant_tenants={1})
    card1 = CardInfo(index=1, memory_total_mb=1000, memory_used_mb=700, shard_memory_mb=600, shard_tasks=2,
                     occupant_tenants={1, 2})
    node = NodeInfo(id=1, name="n", gpu_total=2, gpu_used=1, cards=[card0, card1])
    whole = active(1, gpu_required=1, gpus=(0,))
    shard = active(2, shard_card=1, shard_memory_mb=400, tenant_id=2)
    stays = active(3, shard_card=1, shard_memory_mb=200, preemptible=False)
    freed_nodes: list[NodeInfo] = []

    def record(task, freed):
        freed_nodes.append(freed)
        return Status.unschedulable("never")

    plan_preemption(TaskInfo(id=99, tenant_id=1, priority=90), ClusterSnapshot(nodes=[node]), [whole, shard, stays],
                    record, "running")

    freed = freed_nodes[0]  # both victims released
    assert freed.gpu_used == 0
    assert (freed.cards[0].whole_card_tasks, freed.cards[0].memory_used_mb, freed.cards[0].occupant_tenants) \
        == (0, 0, set())
    assert (freed.cards[1].shard_tasks, freed.cards[1].shard_memory_mb, freed.cards[1].memory_used_mb) == (1, 200, 300)
    assert freed.cards[1].occupant_tenants == {1}
    assert (card0.whole_card_tasks, card1.shard_tasks, card1.occupant_tenants) == (1, 2, {1, 2})


def test_no_eligible_victims_is_the_nodes_reason():
    node = NodeInfo(id=1, name="n")
    search = plan_preemption(TaskInfo(id=99, tenant_id=1, priority=90), ClusterSnapshot(nodes=[node]),
                             [active(1, preemptible=False)], lambda task, freed: SUCCESS, "running")
    assert search.plan is None
    assert search.failure_message == "no preemption victims found: 1 node: no eligible victims."
    assert search.node_reasons == {"n": "no eligible victims"}
