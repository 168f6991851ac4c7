"""The weighted queue order in the cycle and the optional task deadline it reads (design §16.3, seed 002)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.models import PluginConfig, Task, TaskGroup, TaskType
from scheduling.queue.entries import take_active
from scheduling.queue.weighted import entry_facts
from tests.factories import make_node, make_task
from tests.scheduling.preemption.conftest import placed_task

pytestmark = pytest.mark.django_db


def set_order(order: str) -> None:
    PluginConfig.objects.update_or_create(name="queue-sort", defaults={"enabled": True, "weight": 0,
                                                                       "extra": {"order": order}})


@pytest.fixture
def one_free_card(tenant):
    """A node with one free card; a priority-40 task half an hour into a 31-minute deadline, and a priority-60 task
    just submitted without one."""
    node = make_node(cards=2)
    placed_task(tenant=tenant, node=node, gpus=[0], preemptible=False)
    now = timezone.now()
    urgent = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=1, priority=40,
                       deadline=now + timedelta(minutes=1))
    Task.objects.filter(id=urgent.id).update(created_at=now - timedelta(minutes=30))
    important = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=1, priority=60)
    return urgent, important


def test_the_priority_order_is_the_default(one_free_card):
    urgent, important = one_free_card
    run_cycle()
    assert Task.objects.get(id=important.id).status == lifecycle.SCHEDULED
    assert Task.objects.get(id=urgent.id).status == lifecycle.PENDING


def test_the_weighted_order_runs_work_near_its_deadline_first(one_free_card):
    urgent, important = one_free_card
    set_order("weighted")
    run_cycle()
    assert Task.objects.get(id=urgent.id).status == lifecycle.SCHEDULED
    assert Task.objects.get(id=important.id).status == lifecycle.PENDING


def test_the_facts_of_a_task_entry(one_free_card):
    urgent, _ = one_free_card
    facts = entry_facts(take_active(10))
    assert facts[("task", urgent.id)].deadline == Task.objects.get(id=urgent.id).deadline
    assert (facts[("task", urgent.id)].cards, facts[("task", urgent.id)].priority) == (1, 40)


def test_the_api_takes_a_future_deadline_and_refuses_a_past_one(tenant_client):
    body = {"name": "due", "gpu_type": "nvidia", "gpu_required": 1}
    due = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    created = tenant_client.post("/api/v1/tasks", {**body, "deadline": due.isoformat()}, format="json")
    assert created.status_code == 201 and Task.objects.get(id=created.data["id"]).deadline == due
    assert created.data["deadline"] is not None
    # Not a date-time is a 400 (the schema's format); a well-formed one in the past or too far ahead a rule's 403.
    for wrong, status in (((timezone.now() - timedelta(minutes=1)).isoformat(), 403), ("tomorrow", 400),
                          ((timezone.now() + timedelta(days=400)).isoformat(), 403)):
        refused = tenant_client.post("/api/v1/tasks", {**body, "deadline": wrong}, format="json")
        assert refused.status_code == status and "deadline" in str(refused.data), wrong
    assert Task.objects.count() == 1


def test_the_job_form_takes_a_deadline_and_shows_its_error(tenant_web):
    job = {"name": "due", "gpu_type": "nvidia", "gpu_required": "1"}
    due = (timezone.now() + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    assert tenant_web.post("/tasks/new/", {**job, "deadline": due}).status_code == 302
    assert Task.objects.get().deadline is not None
    page = tenant_web.post("/tasks/new/", {**job, "deadline": "2001-01-01T00:00"}).content.decode()
    assert '<div class="field-error" data-field="deadline">' in page


def test_a_gang_counts_every_members_cards_and_its_earliest_deadline(tenant):
    group = TaskGroup.objects.create(tenant=tenant, name="gang", type=TaskType.TRAINING, world_size=2,
                                     gpus_per_worker=4, gpu_type="nvidia")
    soon = timezone.now() + timedelta(minutes=5)
    for rank, deadline in enumerate((soon + timedelta(hours=1), soon)):
        make_task(tenant=tenant, type=TaskType.TRAINING, group=group, rank=rank, gpu_type="nvidia",
                  gpu_required=4, deadline=deadline)
    facts = entry_facts(take_active(10))[("gang", group.id)]
    assert (facts.cards, facts.deadline) == (8, Task.objects.filter(group=group).order_by("deadline")[0].deadline)
