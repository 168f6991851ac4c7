"""`audit_ledgers` recounts the usage records from the tasks that still exist (design §17.4)."""

from datetime import date, datetime, timedelta, timezone as dt_timezone

import pytest
from django.core.management import call_command
from django.db.models import F
from django.utils import timezone

from scheduling import lifecycle
from scheduling.models import TaskEvent, UsageRecord
from scheduling.services.task_transition import task_transition
from scheduling.usage.audit import usage_differences
from tests.factories import make_node, make_task


@pytest.fixture
def recorded(monkeypatch, tenant):
    """A task that ran from 23:00 to 01:30 the next day, two days ago, recorded by its transitions."""
    today = timezone.now().date()
    start = datetime.combine(today - timedelta(days=2), datetime.min.time(), dt_timezone.utc) + timedelta(hours=23)
    node = make_node(gpu_used=2)
    monkeypatch.setattr(timezone, "now", lambda: start)
    task = make_task(tenant=tenant, gpu_type="nvidia", card_type="nvidia", gpu_required=2,
                     status=lifecycle.SCHEDULED, node=node)
    assert task_transition(task.id, lifecycle.SCHEDULED, lifecycle.RUNNING)
    monkeypatch.setattr(timezone, "now", lambda: start + timedelta(hours=2, minutes=30))
    assert task_transition(task.id, lifecycle.RUNNING, lifecycle.SUCCEEDED)
    monkeypatch.undo()
    return start.date()


@pytest.mark.django_db
def test_records_written_by_the_transitions_match_their_tasks(recorded):
    assert UsageRecord.objects.count() == 2
    assert usage_differences() == []


@pytest.mark.django_db
def test_a_missing_record_and_a_doubled_one_are_reported(recorded, capsys):
    UsageRecord.objects.filter(day=recorded).delete()
    UsageRecord.objects.filter(day=recorded + timedelta(days=1)).update(card_seconds=F("card_seconds") * 2)

    found = {(difference.day, difference.recorded, round(difference.recounted)) for difference in usage_differences()}

    assert found == {(recorded, 0, 7200), (recorded + timedelta(days=1), 2 * 2 * 5400, 2 * 5400)}
    call_command("audit_ledgers", "--fix")
    assert "unrecorded placements" in capsys.readouterr().out


@pytest.mark.django_db
def test_usage_beyond_the_retention_horizon_may_exceed_the_tasks_left(tenant, settings):
    settings.HETEROFLOW_TASK_RETENTION_DAYS = 30
    UsageRecord.objects.create(tenant=tenant, day=date.today() - timedelta(days=40), gpu_type="nvidia",
                               task_type="batch", card_seconds=3600)

    assert usage_differences() == []
    assert TaskEvent.objects.count() == 0
