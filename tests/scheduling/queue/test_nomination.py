"""Nomination (design §15.1): the cards a preemption frees, and the free ones its plan counted on, are held for the
preemptor, not given to lower-priority work while the victims stop."""

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.models import Task
from scheduling.preemption.settle import settle_preempted
from tests.factories import make_node, make_task
from tests.scheduling.preemption.conftest import placed_task, running_stage, statuses  # noqa: F401 (fixture)


def test_cards_freed_by_a_preemption_are_held_for_the_preemptor_and_it_binds_them(tenant, running_stage):
    node = make_node(cards=4)
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1], priority=10)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=4)
    assert run_cycle().preempting == 1
    assert Task.objects.get(id=urgent.id).nominated_node_id == node.id

    # Two cards are free and the victim's two are on their way: a lower-priority task gets none of them.
    lower = make_task(tenant=tenant, priority=50, gpu_required=1)
    run_cycle()
    assert statuses(victim, urgent, lower) == ["preempting", "pending", "pending"]
    assert Task.objects.select_related("attempt").get(id=lower.id).attempt.code == reasons.INSUFFICIENT_RESOURCES

    assert settle_preempted(victim.id)
    run_cycle()

    urgent.refresh_from_db()
    assert (urgent.status, urgent.node_id, sorted(urgent.gpus)) == (lifecycle.SCHEDULED, node.id, [0, 1, 2, 3])
    assert urgent.nominated_node_id is None
    assert statuses(lower) == ["pending"]


def test_a_nomination_ends_with_the_nominees_next_attempt_once_its_victims_are_gone(tenant, running_stage):
    node = make_node(cards=2)
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1], priority=10)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=2, preemptible=False)
    run_cycle()
    # The victim finished on its own and someone cordoned the node: the nominee cannot bind there any more.
    assert settle_preempted(victim.id)
    node.schedulable = False
    node.save(update_fields=["schedulable"])

    run_cycle()

    urgent.refresh_from_db()
    assert urgent.status == lifecycle.PENDING and urgent.nominated_node_id is None
