import re
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from nodes.models import Node
from scheduling import metrics
from scheduling.cycle.run import run_cycle
from scheduling.models import AttemptCodeCount, SchedulingAttempt
from tenants.models import Cohort, Tenant, TenantGpuQuota
from tests.factories import make_node, make_task


@pytest.mark.django_db
def test_metrics_report_ledgers_and_attempts_from_the_database(admin_user, tenant):
    make_node(gpu_type="ascend", cards=8, gpu_used=3)
    make_task(tenant=tenant)
    AttemptCodeCount.objects.create(code="QuotaExceeded", count=4)
    client = Client()
    client.force_login(admin_user)

    body = client.get("/metrics").content.decode()

    assert 'heteroflow_gpus_total{gpu_type="ascend"} 8.0' in body
    assert 'heteroflow_gpus_used{gpu_type="ascend"} 3.0' in body
    assert 'heteroflow_tasks{status="pending"} 1.0' in body
    assert 'heteroflow_scheduling_attempts_total{code="QuotaExceeded"} 4.0' in body


@pytest.mark.django_db
def test_metrics_need_staff_or_the_bearer_token(tenant_client, settings):
    settings.HETEROFLOW_METRICS_TOKEN = "scrape-secret"
    assert Client().get("/metrics").status_code == 403
    tenant_user = Client()
    tenant_user.force_login(tenant_client.user)
    assert tenant_user.get("/metrics").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200


@pytest.fixture
def own_metrics_keys(monkeypatch):
    # Test workers share one Redis: each test reads and writes keys of its own.
    prefix = f"heteroflow:test-metrics:{uuid.uuid4().hex}:"
    monkeypatch.setattr(metrics, "KEY_PREFIX", prefix)
    return prefix


def _missing(body: str, lines: list[str]) -> list[str]:
    return [line for line in lines if line not in body.splitlines()]


def _scrape(admin_user) -> str:
    client = Client()
    client.force_login(admin_user)
    return client.get("/metrics").content.decode()


@pytest.mark.django_db
def test_a_cycle_feeds_duration_binds_and_queue_latency(admin_user, tenant, own_metrics_keys):
    make_node(cards=8)
    make_task(tenant=tenant, gpu_required=1)
    make_task(tenant=tenant, gpu_required=2)
    result = run_cycle()
    assert result.bound == 2

    assert _missing(_scrape(admin_user), [
        "heteroflow_cycle_duration_seconds_count 1.0", "heteroflow_binds_total 2.0",
        "heteroflow_queue_latency_seconds_count 2.0", 'heteroflow_queue_latency_seconds_bucket{le="+Inf"} 2.0',
    ]) == []


@pytest.mark.django_db
def test_events_recorded_by_another_process_show_in_this_ones_scrape(admin_user, own_metrics_keys):
    script = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'heteroflow_site.settings');"
        "django.setup(); from scheduling import metrics; import sys; metrics.KEY_PREFIX = sys.argv[1];"
        "metrics.record_cycle(duration_seconds=0.2, bound=3, queue_latencies=[0.7, 1.5, 40.0]);"
        "metrics.record_ledger_corrections('node_gpu_used', 2)"
    )
    subprocess.run([sys.executable, "-c", script, own_metrics_keys], check=True, timeout=60,
                   cwd=Path(__file__).resolve().parents[2])

    assert _missing(_scrape(admin_user), [
        'heteroflow_cycle_duration_seconds_bucket{le="0.25"} 1.0',
        'heteroflow_cycle_duration_seconds_bucket{le="0.1"} 0.0',
        "heteroflow_binds_total 3.0",
        'heteroflow_queue_latency_seconds_bucket{le="2.0"} 2.0',
        'heteroflow_queue_latency_seconds_bucket{le="60.0"} 3.0',
        "heteroflow_queue_latency_seconds_sum 42.2",
        'heteroflow_ledger_corrections_total{ledger="node_gpu_used"} 2.0',
    ]) == []


@pytest.mark.django_db
def test_backlog_by_tenant_and_band_parked_tasks_and_conflicts(admin_user, tenant, other_tenant, own_metrics_keys):
    make_task(tenant=tenant, priority=90)
    make_task(tenant=tenant, priority=50)
    make_task(tenant=tenant, priority=55)
    waiting = make_task(tenant=other_tenant, priority=10)
    SchedulingAttempt.objects.create(task=waiting, code="InsufficientGPU")
    AttemptCodeCount.objects.create(code="BindConflict", count=3)

    assert _missing(_scrape(admin_user), [
        'heteroflow_pending_tasks{priority_band="high",tenant="acme"} 1.0',
        'heteroflow_pending_tasks{priority_band="normal",tenant="acme"} 2.0',
        'heteroflow_pending_tasks{priority_band="low",tenant="globex"} 1.0',
        "heteroflow_parked_tasks 1.0",
        "heteroflow_cas_conflicts_total 3.0",
    ]) == []


@pytest.mark.django_db
def test_heartbeat_age_per_node_and_ledger_corrections_of_the_recount(admin_user, tenant, own_metrics_keys):
    from scheduling.housekeeping.node_ledger import node_gpu_used_recount

    node = make_node(cards=8, gpu_used=5, name="drifted")
    Node.objects.filter(id=node.id).update(last_heartbeat_at=timezone.now() - timedelta(seconds=42))
    assert node_gpu_used_recount(node_id=node.id) == 0

    body = _scrape(admin_user)
    age = re.search(r'heteroflow_node_heartbeat_age_seconds\{node="drifted",status="online"\} ([0-9.]+)', body)
    assert age and 42 <= float(age.group(1)) < 60
    assert 'heteroflow_ledger_corrections_total{ledger="node_gpu_used"} 1.0' in body
    assert 'heteroflow_nodes{status="online"} 1.0' in body


@pytest.mark.django_db
def test_each_tenants_own_and_borrowed_cards_per_type_beside_its_nominal(admin_user, own_metrics_keys):
    cohort = Cohort.objects.create(name="lab")
    lender, borrower = (Tenant.objects.create(name=name, cohort=cohort) for name in ("lender", "borrower"))
    for tenant in (lender, borrower):
        TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=2)
    make_node(cards=8, memory_mb=81920)
    for _ in range(3):
        make_task(tenant=borrower, gpu_type="nvidia", gpu_required=1, preemptible=True)
    make_task(tenant=lender, gpu_type="nvidia", gpu_memory_mb=20480)
    run_cycle()

    assert _missing(_scrape(admin_user), [
        'heteroflow_tenant_gpu_used{gpu_type="nvidia",kind="own",tenant="borrower"} 2.0',
        'heteroflow_tenant_gpu_used{gpu_type="nvidia",kind="borrowed",tenant="borrower"} 1.0',
        'heteroflow_tenant_gpu_used{gpu_type="nvidia",kind="own",tenant="lender"} 0.25',
        'heteroflow_tenant_gpu_nominal{gpu_type="nvidia",tenant="lender"} 2.0',
    ]) == []


@pytest.mark.django_db
def test_every_metric_of_the_grafana_dashboard_is_exported(admin_user, tenant, own_metrics_keys):
    import json

    make_node(cards=8)
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=4)
    make_task(tenant=tenant, gpu_required=1)
    run_cycle()
    make_task(tenant=tenant, gpu_required=1)
    Node.objects.update(last_heartbeat_at=timezone.now())
    metrics.record_ledger_corrections("node_gpu_used")
    exported = {line.split("{")[0].split(" ")[0] for line in _scrape(admin_user).splitlines()
                if line.startswith("heteroflow_")}

    dashboard = json.loads((Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json").read_text())
    used = {name for panel in dashboard["panels"] for target in panel["targets"]
            for name in re.findall(r"heteroflow_[a-z_]+", target["expr"])}
    assert len(used) >= 12
    assert sorted(used - exported) == []


@pytest.mark.django_db
def test_prometheus_and_the_dashboard_count_cards_per_architecture_alike(admin_user):
    make_node(name="up", gpu_type="ascend", cards=8, gpu_used=3)
    make_node(name="down", gpu_type="ascend", cards=8, gpu_used=2, status="offline")
    client = Client()
    client.force_login(admin_user)

    body = client.get("/metrics").content.decode()

    # The offline node's cards are in the total, and its stale ledger is not "in use", as on the dashboard.
    assert 'heteroflow_gpus_total{gpu_type="ascend"} 16.0' in body
    assert 'heteroflow_gpus_used{gpu_type="ascend"} 3.0' in body


@pytest.mark.django_db
def test_time_to_start_is_a_histogram_per_gpu_type_and_size_class(admin_user, tenant, own_metrics_keys,
                                                                   django_capture_on_commit_callbacks):
    from scheduling import lifecycle
    from scheduling.models import Task
    from scheduling.services.task_transition import task_transition

    node = make_node(cards=8, gpu_used=5)
    waited = {}
    for gpu_required, seconds in ((1, 40), (4, 400), (0, 3)):
        task = make_task(tenant=tenant, gpu_type="nvidia", card_type="nvidia", gpu_required=gpu_required,
                         status=lifecycle.SCHEDULED, node=node)
        Task.objects.filter(id=task.id).update(created_at=timezone.now() - timedelta(seconds=seconds))
        waited[task.id] = seconds
    with django_capture_on_commit_callbacks(execute=True):
        for task_id in waited:
            assert task_transition(task_id, lifecycle.SCHEDULED, lifecycle.RUNNING)

    assert _missing(_scrape(admin_user), [
        'heteroflow_time_to_start_seconds_bucket{gpu_type="nvidia",le="30.0",size="1"} 0.0',
        'heteroflow_time_to_start_seconds_bucket{gpu_type="nvidia",le="60.0",size="1"} 1.0',
        'heteroflow_time_to_start_seconds_bucket{gpu_type="nvidia",le="300.0",size="2-4"} 0.0',
        'heteroflow_time_to_start_seconds_bucket{gpu_type="nvidia",le="900.0",size="2-4"} 1.0',
        'heteroflow_time_to_start_seconds_bucket{gpu_type="nvidia",le="5.0",size="fraction"} 1.0',
        'heteroflow_time_to_start_seconds_count{gpu_type="nvidia",size="fraction"} 1.0',
    ]) == []


@pytest.mark.django_db
def test_card_health_per_type_and_state_is_exported_and_quarantined_cards_are_not_free(admin_user, tenant_web):
    """design §17.3: `heteroflow_gpu_health{gpu_type,state}`; the dashboard counts quarantined cards per type."""
    from nodes.models import GPU

    node = make_node(name="sick", gpu_type="nvidia", cards=4)
    make_node(name="npu", gpu_type="ascend", cards=2)
    GPU.objects.filter(node=node, index=0).update(health="failed", quarantined_at=timezone.now())
    GPU.objects.filter(node=node, index=1).update(health="degraded")
    client = Client()
    client.force_login(admin_user)
    body = client.get("/metrics").content.decode()
    for gpu_type, state, count in (("nvidia", "ok", 2), ("nvidia", "degraded", 1), ("nvidia", "failed", 0),
                                   ("nvidia", "quarantined", 1), ("ascend", "ok", 2)):
        assert f'heteroflow_gpu_health{{gpu_type="{gpu_type}",state="{state}"}} {count}.0' in body
    page = tenant_web.get("/").content.decode()
    row = page[page.index('<span class="tag">nvidia</span>'):].split("</tr>")[0]
    assert 'class="num quarantined-cards"><span class="pill pill-bad plain">1</span>' in row
    assert '<td class="num">3</td><td class="num quarantined' in row
