from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.history.samples import HISTORY_KEEP, cluster_sample_record
from scheduling.models import ClusterSample, CycleRecord
from tenants.models import Tenant
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


def test_a_point_holds_cards_per_type_pending_tasks_and_the_mean_cycle():
    tenant = Tenant.objects.create(name="acme")
    node = make_node(cards=8, gpu_type="nvidia")
    make_node(cards=4, gpu_type="ascend", model="910B")
    make_task(tenant=tenant, status="running", node=node, gpu_required=2, card_type="nvidia")
    make_task(tenant=tenant, status="pending", gpu_required=1)
    now = timezone.now()
    for duration in (10.0, 30.0):
        CycleRecord.objects.create(started_at=now - timedelta(seconds=20), duration_ms=duration)

    sample = cluster_sample_record(now=now)

    assert sample.gpu_total == {"nvidia": 8, "ascend": 4}
    assert sample.gpu_used == {"nvidia": 2, "ascend": 0}
    assert (sample.pending, sample.cycle_ms) == (1, 20.0)


def test_points_older_than_a_day_are_dropped():
    now = timezone.now()
    ClusterSample.objects.create(at=now - HISTORY_KEEP - timedelta(minutes=1))
    kept = ClusterSample.objects.create(at=now - HISTORY_KEEP + timedelta(minutes=1))

    latest = cluster_sample_record(now=now)

    assert list(ClusterSample.objects.values_list("id", flat=True)) == [kept.id, latest.id]


def test_a_day_of_points_is_thinned_to_the_latest_of_each_slice():
    from scheduling.history.samples import cluster_history

    now = timezone.now()
    ClusterSample.objects.bulk_create([ClusterSample(at=now - timedelta(minutes=minute), pending=minute)
                                       for minute in range(0, 1440)])

    points = cluster_history(since=now - HISTORY_KEEP, points=24)

    assert 24 <= len(points) <= 25
    assert [point.at for point in points] == sorted(point.at for point in points)
    assert points[-1].pending == 0, "the newest point is always drawn"
