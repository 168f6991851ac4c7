"""The queue order within a priority (design §17.1, §17.4): creation (FIFO) by default, whatever the quotas; the
lowest decayed usage ÷ nominal first under `queue-sort: fair-share`."""

import math
import random
from datetime import date, datetime, timedelta, timezone

import pytest

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.fair_share.decayed import DecayedShare, decayed_shares
from scheduling.models import PluginConfig, Task, UsageRecord
from scheduling.queue.entries import GANG, TASK, QueueEntry
from scheduling.queue.fair_share_order import fair_share_order
from tenants.models import Tenant, TenantGpuQuota
from tests.factories import make_node, make_task

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW = datetime(2026, 3, 15, 12, 0, tzinfo=timezone.utc)


def test_equal_priorities_go_by_decayed_share_then_creation_and_priority_still_comes_first():
    shares = {1: DecayedShare(1, 3 * 3600, 4), 2: DecayedShare(2, 1 * 3600, 4), 3: DecayedShare(3, 0, None)}
    entries = [QueueEntry(TASK, 1, 50, T0, 1), QueueEntry(GANG, 2, 50, T0 + timedelta(1), 2),
               QueueEntry(TASK, 3, 50, T0 + timedelta(2), 2), QueueEntry(TASK, 4, 90, T0 + timedelta(3), 1),
               QueueEntry(TASK, 5, 50, T0 + timedelta(4), 3)]

    # tenant 3 has no nominal: after every tenant with one.
    assert [entry.id for entry in fair_share_order(entries, shares)] == [4, 2, 3, 1, 5]


def test_tenants_without_a_nominal_go_by_their_decayed_usage():
    assert DecayedShare(1, 10.0, None).share == math.inf
    shares = {1: DecayedShare(1, 50.0, None), 2: DecayedShare(2, 10.0, None)}
    entries = [QueueEntry(TASK, 1, 50, T0, 1), QueueEntry(TASK, 2, 50, T0 + timedelta(1), 2)]

    assert [entry.id for entry in fair_share_order(entries, shares)] == [2, 1]


@pytest.mark.django_db
def test_old_usage_weighs_less_than_recent_usage_and_nominal_divides(settings):
    settings.HETEROFLOW_FAIR_SHARE_HALF_LIFE = 7
    long_ago, lately, big = (Tenant.objects.create(name=name) for name in ("long-ago", "lately", "big"))
    for tenant, nominal in ((long_ago, 1), (lately, 1), (big, 4)):
        TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=nominal)
    day = NOW.date()
    for tenant, when, hours in ((long_ago, day - timedelta(days=14), 100), (lately, day - timedelta(days=1), 40),
                                (big, day - timedelta(days=1), 40)):
        UsageRecord.objects.create(tenant=tenant, day=when, gpu_type="nvidia", task_type="batch",
                                   card_seconds=hours * 3600)
    # Older than ten half-lives: not read at all.
    UsageRecord.objects.create(tenant=big, day=date(2025, 1, 1), gpu_type="nvidia", task_type="batch",
                               card_seconds=1e12)

    shares = decayed_shares([long_ago.id, lately.id, big.id], now=NOW)

    # 14 days from 12:00 to 12:00: two half-lives; yesterday's midday: one day.
    assert shares[long_ago.id].share == pytest.approx(25.0)
    assert shares[lately.id].share == pytest.approx(40 * 0.5 ** (1 / 7))
    assert shares[big.id].share == pytest.approx(40 * 0.5 ** (1 / 7) / 4)
    assert sorted(shares, key=lambda tenant_id: shares[tenant_id].order_key) == [big.id, long_ago.id, lately.id]


@pytest.mark.django_db
def test_a_running_placement_counts_before_it_is_recorded(tenant):
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=2)
    node = make_node(cards=4, gpu_used=2)
    make_task(tenant=tenant, gpu_type="nvidia", card_type="nvidia", gpu_required=2, status=lifecycle.RUNNING,
              node=node, started_at=NOW - timedelta(hours=1))

    # Two cards for an hour, half an hour ago on average, over a nominal of two cards.
    assert decayed_shares([tenant.id], now=NOW)[tenant.id].share == pytest.approx(
        0.5 ** (1800 / (7 * 86400)))


@pytest.fixture
def two_tenants_one_free_pair():
    """Tenants with equal quotas of four cards: `heavy` used half of it all last week and holds half now, `light`
    nothing.
    heavy's pending task is the older one; one pair of cards is free for the two."""
    heavy, light = (Tenant.objects.create(name=name) for name in ("heavy", "light"))
    for tenant in (heavy, light):
        TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=4)
    today = datetime.now(timezone.utc).date()
    for days in range(1, 8):
        UsageRecord.objects.create(tenant=heavy, day=today - timedelta(days=days), gpu_type="nvidia",
                                   task_type="batch", card_seconds=2 * 86400)
    busy = make_node(cards=2, gpu_used=2)
    make_task(tenant=heavy, gpu_type="nvidia", card_type="nvidia", gpu_required=2, gpus=[0, 1], node=busy,
              status=lifecycle.RUNNING, started_at=datetime.now(timezone.utc) - timedelta(hours=1))
    make_node(cards=2)
    older = make_task(tenant=heavy, gpu_type="nvidia", gpu_required=2)
    newer = make_task(tenant=light, gpu_type="nvidia", gpu_required=2)
    return older, newer


def _order(order: str) -> None:
    PluginConfig.objects.update_or_create(name="queue-sort", defaults={"enabled": True, "weight": 0,
                                                                       "extra": {"order": order}})


@pytest.mark.django_db
def test_the_default_order_is_fifo_within_a_priority_whatever_the_quotas(two_tenants_one_free_pair):
    older, newer = two_tenants_one_free_pair

    run_cycle(rng=random.Random(1))

    assert Task.objects.get(id=older.id).status == lifecycle.SCHEDULED
    assert Task.objects.get(id=newer.id).status == lifecycle.PENDING


@pytest.mark.django_db
def test_under_fair_share_the_lower_decayed_share_binds_first(two_tenants_one_free_pair):
    older, newer = two_tenants_one_free_pair
    _order("fair-share")

    run_cycle(rng=random.Random(1))

    assert Task.objects.get(id=newer.id).status == lifecycle.SCHEDULED
    assert Task.objects.get(id=older.id).status == lifecycle.PENDING
