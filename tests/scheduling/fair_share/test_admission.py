"""Admission by per-type quotas and cohorts through the real cycle and bind (design §16.2)."""

import random
import threading

import pytest
from django.db import connection

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.models import SchedulingAttempt, Task
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from tenants.models import Cohort, Tenant, TenantGpuQuota
from tests.factories import make_node, make_task
from tests.scheduling.bind.single import bind_task

pytestmark = pytest.mark.django_db


def _tenants(*nominals, cohort=True):
    shared = Cohort.objects.create(name="research") if cohort else None
    tenants = []
    for number, nominal in enumerate(nominals):
        tenant = Tenant.objects.create(name=f"team-{number}", cohort=shared)
        TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=nominal)
        tenants.append(tenant)
    return tenants


def _borrowers(tenant, count, **fields):
    return [make_task(tenant=tenant, gpu_type="nvidia", gpu_required=1, preemptible=True, **fields)
            for _ in range(count)]


def _scheduled(tasks):
    return Task.objects.filter(id__in=[task.id for task in tasks], status=lifecycle.SCHEDULED)


def test_one_tenant_of_a_cohort_alone_runs_all_eight_cards_four_of_them_borrowed():
    first, _ = _tenants(4, 4)
    make_node(cards=8)
    tasks = _borrowers(first, 10)
    run_cycle(rng=random.Random(1))

    assert _scheduled(tasks).count() == 8
    assert _scheduled(tasks).filter(borrowed=True).count() == 4
    waiting = Task.objects.get(id=tasks[-1].id)
    attempt = SchedulingAttempt.objects.get(task=waiting)
    assert attempt.code == reasons.QUOTA_EXCEEDED
    assert attempt.message == ("quota exceeded for nvidia: used 8 / nominal 4, asked 1; the cohort has 0 to lend")


def test_without_the_cohort_the_tenant_runs_its_nominal_only():
    first, _ = _tenants(4, 4, cohort=False)
    make_node(cards=8)
    tasks = _borrowers(first, 10)
    run_cycle(rng=random.Random(1))

    assert _scheduled(tasks).count() == 4
    assert not _scheduled(tasks).filter(borrowed=True).exists()


def test_fractional_tasks_count_their_share_against_per_type_quotas_and_the_total_cap():
    # 20 GiB shards of 80 GiB cards: a quarter of a card each (design §16.2).
    typed, capped = _tenants(1, cohort=False)[0], Tenant.objects.create(name="capped", gpu_quota=1)
    make_node(cards=8, memory_mb=81920)
    shards = {tenant: [make_task(tenant=tenant, gpu_type="nvidia", gpu_memory_mb=20480) for _ in range(5)]
              for tenant in (typed, capped)}
    run_cycle(rng=random.Random(1))

    for tenant, tasks in shards.items():
        assert _scheduled(tasks).count() == 4, tenant.name
        assert SchedulingAttempt.objects.get(task=tasks[-1]).code == reasons.QUOTA_EXCEEDED
    assert SchedulingAttempt.objects.get(task=shards[typed][-1]).message.startswith(
        "quota exceeded for nvidia: used 1 / nominal 1, asked 0.25")
    assert SchedulingAttempt.objects.get(task=shards[capped][-1]).message == (
        "quota exceeded: used 1 / quota 1, asked 0.25")


def test_work_that_may_not_be_evicted_stays_within_nominal():
    first, _ = _tenants(4, 4)
    make_node(cards=8)
    tasks = [make_task(tenant=first, gpu_type="nvidia", gpu_required=1) for _ in range(6)]
    run_cycle(rng=random.Random(1))

    assert _scheduled(tasks).count() == 4


def test_borrowed_shows_in_the_api(admin_client):
    first, _ = _tenants(1, 4)
    make_node(cards=8)
    own, lent = _borrowers(first, 2)
    run_cycle(rng=random.Random(1))

    assert admin_client.get(f"/api/v1/tasks/{own.id}").json()["borrowed"] is False
    assert admin_client.get(f"/api/v1/tasks/{lent.id}").json()["borrowed"] is True


@pytest.mark.django_db(transaction=True)
def test_concurrent_binds_of_two_tenants_of_one_cohort_never_borrow_the_same_quota_twice():
    # The lender has 3 cards unused; two borrowers (nominal 0) each ask for 2 on a node of their own, so no node
    # lock serialises them: only the cohort's lock can keep them from lending the same cards twice.
    _, *borrowers = _tenants(3, 0, 0)
    placements = []
    for borrower in borrowers:
        task = make_task(tenant=borrower, gpu_type="nvidia", gpu_required=2, preemptible=True)
        info = task_info_from_row(Task.objects.filter(id=task.id).values_list(*TASK_INFO_FIELDS).get())
        placements.append((info, make_node(cards=2).id))
    snapshot = build_snapshot()
    start = threading.Barrier(len(placements))
    outcomes = []

    def bind(task, node_id):
        try:
            start.wait()
            outcomes.append(bind_task(task, snapshot.node(node_id), [0, 1], config=SchedulerConfig()))
        finally:
            connection.close()

    threads = [threading.Thread(target=bind, args=placement) for placement in placements]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcome.code for outcome in outcomes) == [reasons.QUOTA_EXCEEDED, reasons.SCHEDULED]
    assert Task.objects.filter(status=lifecycle.SCHEDULED, borrowed=True).count() == 1
