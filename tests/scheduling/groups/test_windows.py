import threading
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.db import connections

from scheduling.groups import windows
from scheduling.groups.replicas import rebuild_inference_groups
from scheduling.groups.services import task_group_create
from scheduling.groups.windows import apply_scheduling_windows, validate_window, window_contains
from scheduling.models import Task, TaskGroup
from tenants.models import Tenant

SHANGHAI = ZoneInfo("Asia/Shanghai")
# 2026-12-02 is a Wednesday (weekday 2).
WEDNESDAY_10_SHANGHAI = datetime(2026, 12, 2, 10, 0, tzinfo=SHANGHAI)
WEDNESDAY_22_SHANGHAI = datetime(2026, 12, 2, 22, 0, tzinfo=SHANGHAI)
THURSDAY_10_SHANGHAI = datetime(2026, 12, 3, 10, 0, tzinfo=SHANGHAI)

OFFICE_HOURS = {"days": [0, 1, 2, 3, 4], "start": "09:00", "end": "18:00", "timezone": "Asia/Shanghai"}


def live(group):
    return Task.objects.filter(group=group, status__in=["pending", "scheduled", "running"]).count()


def inference_group(tenant, action, **window):
    return task_group_create(tenant=tenant, name=f"svc-{action}", type="inference", world_size=1, gpus_per_worker=1,
                             replicas=3, window={**OFFICE_HOURS, "action": action, **window})


def test_time_zones_are_honoured():
    assert window_contains(OFFICE_HOURS, WEDNESDAY_10_SHANGHAI)
    # 10:00 in Shanghai is 02:00 UTC: the same instant written in UTC is still inside.
    assert window_contains(OFFICE_HOURS, WEDNESDAY_10_SHANGHAI.astimezone(ZoneInfo("UTC")))
    assert not window_contains(OFFICE_HOURS, WEDNESDAY_22_SHANGHAI)
    assert not window_contains(OFFICE_HOURS, datetime(2026, 12, 5, 10, 0, tzinfo=SHANGHAI)), "Saturday"


def test_overnight_windows_belong_to_the_day_they_open():
    night = {"days": [4], "start": "22:00", "end": "06:00", "timezone": "UTC"}
    assert window_contains(night, datetime(2026, 12, 4, 23, 0, tzinfo=ZoneInfo("UTC")))  # Friday night
    assert window_contains(night, datetime(2026, 12, 5, 5, 0, tzinfo=ZoneInfo("UTC")))  # Saturday early
    assert not window_contains(night, datetime(2026, 12, 3, 23, 0, tzinfo=ZoneInfo("UTC")))  # Thursday night


@pytest.mark.parametrize("bad", [{"start": "9", "end": "18:00", "action": "pause"},
                                 {"start": "09:00", "end": "18:00", "action": "sleep"},
                                 {"start": "09:00", "end": "18:00", "action": "scale"},
                                 {"start": "09:00", "end": "18:00", "action": "pause", "timezone": "Mars/Base"},
                                 {"start": "09:00", "end": "18:00", "action": "pause", "days": [7]}])
def test_bad_windows_are_refused(bad):
    with pytest.raises(ValueError):
        validate_window(bad)


@pytest.mark.django_db
def test_pause_goes_to_zero_and_restores_the_count_from_before(tenant):
    group = inference_group(tenant, "pause")
    assert live(group) == 3

    apply_scheduling_windows(WEDNESDAY_22_SHANGHAI)
    group.refresh_from_db()
    assert (group.replicas, group.window_applied, live(group)) == (0, "pause", 0)

    apply_scheduling_windows(THURSDAY_10_SHANGHAI)
    group.refresh_from_db()
    assert (group.replicas, group.window_applied) == (3, "")
    assert rebuild_inference_groups() == 3
    assert live(group) == 3


@pytest.mark.django_db
def test_scale_goes_to_scale_to_and_restores(tenant):
    group = inference_group(tenant, "scale", scale_to=1)

    apply_scheduling_windows(WEDNESDAY_22_SHANGHAI)
    group.refresh_from_db()
    assert (group.replicas, live(group)) == (1, 1)

    apply_scheduling_windows(THURSDAY_10_SHANGHAI)
    group.refresh_from_db()
    assert group.replicas == 3


@pytest.mark.django_db
def test_stop_stops_everything_and_does_not_restore(tenant):
    group = inference_group(tenant, "stop")

    apply_scheduling_windows(WEDNESDAY_22_SHANGHAI)
    apply_scheduling_windows(THURSDAY_10_SHANGHAI)

    group.refresh_from_db()
    assert group.status == TaskGroup.Status.STOPPED
    assert (group.replicas, live(group)) == (0, 0)
    assert rebuild_inference_groups() == 0


@pytest.mark.django_db
def test_scale_up_is_skipped_for_an_inactive_tenant_but_pause_is_not(tenant):
    grow = inference_group(tenant, "scale", scale_to=5)
    pause = task_group_create(tenant=tenant, name="svc-pause", type="inference", world_size=1, gpus_per_worker=1,
                              replicas=2, window={**OFFICE_HOURS, "action": "pause"})
    Tenant.objects.filter(id=tenant.id).update(status=Tenant.Status.INACTIVE)

    apply_scheduling_windows(WEDNESDAY_22_SHANGHAI)

    grow.refresh_from_db()
    pause.refresh_from_db()
    assert (grow.replicas, grow.window_applied) == (3, "")
    assert (pause.replicas, pause.window_applied) == (0, "pause")


@pytest.mark.django_db(transaction=True)
def test_only_one_leader_acts_when_two_schedulers_run_the_job_at_once(tenant, monkeypatch):
    inference_group(tenant, "pause")
    monkeypatch.setattr(windows, "_after_leader_work", lambda: time.sleep(0.5))
    barrier = threading.Barrier(2)
    runs = []

    def scheduler():
        try:
            barrier.wait()
            runs.append(apply_scheduling_windows(WEDNESDAY_22_SHANGHAI))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=scheduler) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(run.leader for run in runs) == [False, True]
    assert [len(run.changed_groups) for run in runs if run.leader] == [1]
