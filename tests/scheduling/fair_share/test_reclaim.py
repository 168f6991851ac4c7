"""Reclaim (design §16.2): a tenant within its nominal quota takes back what its cohort borrows."""

import random

import pytest

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.models import SchedulingAttempt, Task
from scheduling.preemption.settle import settle_preempted
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task
from tests.scheduling.fair_share.test_admission import _borrowers, _tenants

pytestmark = pytest.mark.django_db


def _cycle():
    return run_cycle(rng=random.Random(3))


def _run_all(tasks):
    for task in Task.objects.filter(id__in=[task.id for task in tasks], status=lifecycle.SCHEDULED):
        assert task_transition(task.id, lifecycle.SCHEDULED, lifecycle.RUNNING)


def test_borrowed_work_is_reclaimed_and_the_lenders_tasks_bind_once_the_victims_stopped():
    borrower, lender = _tenants(4, 4)
    make_node(cards=8)
    borrowed_work = _borrowers(borrower, 8, priority=30)
    _cycle()
    _run_all(borrowed_work)
    assert Task.objects.filter(status=lifecycle.RUNNING, borrowed=True).count() == 4

    # Of the same priority as the borrowed work: §9 alone would evict nothing for them, reclaim does.
    own = [make_task(tenant=lender, gpu_type="nvidia", gpu_required=1, priority=30) for _ in range(2)]
    _cycle()

    victims = Task.objects.filter(status=lifecycle.PREEMPTING)
    assert victims.count() == 2 and all(victim.borrowed for victim in victims)
    assert {SchedulingAttempt.objects.get(task=task).code for task in own} == {reasons.RECLAIM_PENDING}

    for victim in victims:
        assert settle_preempted(victim.id)
    _cycle()

    assert Task.objects.filter(id__in=[task.id for task in own], status=lifecycle.SCHEDULED).count() == 2
    # The victims wait: evicted once, they are no longer preemptible, so they may not borrow again.
    evicted = Task.objects.filter(status=lifecycle.PENDING, tenant=borrower)
    assert evicted.count() == 2
    assert {SchedulingAttempt.objects.get(task=task).code for task in evicted} == {reasons.QUOTA_EXCEEDED}


def test_no_reclaim_beyond_the_tenants_nominal_and_none_of_work_within_nominal():
    borrower, lender = _tenants(4, 1)
    make_node(cards=5)
    work = _borrowers(borrower, 5, priority=30)
    _cycle()
    _run_all(work)
    assert Task.objects.filter(status=lifecycle.RUNNING, borrowed=True).count() == 1

    within, beyond = (make_task(tenant=lender, gpu_type="nvidia", gpu_required=1, priority=30) for _ in range(2))
    _cycle()
    assert Task.objects.filter(status=lifecycle.PREEMPTING).count() == 1
    for victim in Task.objects.filter(status=lifecycle.PREEMPTING):
        settle_preempted(victim.id)
    _cycle()

    assert Task.objects.get(id=within.id).status == lifecycle.SCHEDULED
    # Beyond its nominal the lender may not borrow (not preemptible) and reclaims nothing: the borrower's four
    # tasks within its own nominal stay.
    assert Task.objects.get(id=beyond.id).status == lifecycle.PENDING
    assert Task.objects.filter(tenant=borrower, status=lifecycle.RUNNING).count() == 4


def test_the_preemption_plan_preview_shows_a_reclaim(admin_client):
    borrower, lender = _tenants(2, 2)
    make_node(cards=4)
    work = _borrowers(borrower, 4, priority=30)
    _cycle()
    _run_all(work)
    waiting = make_task(tenant=lender, gpu_type="nvidia", gpu_required=1, priority=30)

    plan = admin_client.get(f"/api/v1/tasks/{waiting.id}/preemption-plan").json()

    assert plan["reclaim"] is True and len(plan["victims"]) == 1
    assert Task.objects.get(id=plan["victims"][0]["task"]).borrowed
    assert not Task.objects.filter(status=lifecycle.PREEMPTING).exists()
