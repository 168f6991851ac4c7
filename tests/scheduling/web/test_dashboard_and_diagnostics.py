import re
import time

import pytest

from scheduling.models import AttemptCodeCount, CycleRecord, SchedulingAttempt
from tests.factories import make_node, make_task
from tests.web_clients import HTMX


@pytest.mark.django_db
def test_dashboard_shows_capacity_per_architecture(tenant_web):
    make_node(gpu_type="nvidia", cards=8, gpu_used=3)
    make_node(gpu_type="ascend", cards=4, status="offline")
    page = tenant_web.get("/").content.decode()
    assert "<svg" in page and "3/8" in page and "0/4" in page
    assert ">nvidia</text>" in page and ">ascend</text>" in page


@pytest.mark.django_db
def test_dashboard_fragmentation_counts_cards_usable_by_k_card_tasks(tenant_web):
    make_node(cards=3)
    make_node(cards=2)
    page = tenant_web.get("/").content.decode()
    panel = page[page.index("Fragmentation"):]
    assert 'aria-label="Fragmentation: 5 free cards, ' in panel
    values = [chunk.split("<", 1)[0] for chunk in panel.split('font-weight="600" fill="#0f172a">')[1:6]]
    assert values == ["5", "5", "4", "0", "0"]


@pytest.mark.django_db
def test_dashboard_pending_by_code_counts_only_the_tenants_tasks(tenant_web, tenant, other_tenant):
    mine = make_task(tenant=tenant)
    theirs = make_task(tenant=other_tenant)
    SchedulingAttempt.objects.create(task=mine, code="QuotaExceeded", message="quota")
    SchedulingAttempt.objects.create(task=theirs, code="GPUTypeUnavailable", message="type")
    page = tenant_web.get("/").content.decode()
    assert "<code>QuotaExceeded</code>" in page
    assert "GPUTypeUnavailable" not in page


@pytest.mark.django_db
def test_dashboard_lists_the_last_cycles(tenant_web):
    from django.utils import timezone

    CycleRecord.objects.create(started_at=timezone.now(), considered=7, bound=5, failed=2, duration_ms=12.5)
    page = tenant_web.get("/").content.decode()
    assert "12.5 ms" in page


@pytest.mark.django_db
def test_diagnostics_page_shows_attempt_counts_and_pending_summaries(admin_web, tenant):
    AttemptCodeCount.objects.create(code="InsufficientResources", count=42)
    task = make_task(tenant=tenant, name="stuck")
    SchedulingAttempt.objects.create(task=task, code="InsufficientResources",
                                     message="0/3 nodes are available: 3 Insufficient GPU.")
    page = admin_web.get("/diagnostics/").content.decode()
    assert "<code>InsufficientResources</code></td><td class=\"num\"><strong>42" in page
    assert "0/3 nodes are available: 3 Insufficient GPU." in page
    assert 'ws-connect="/ws/diagnostics/"' in page


@pytest.mark.django_db
def test_run_a_cycle_now_queues_one_then_says_what_it_did(admin_web, tenant):
    from heteroflow_site.celery import run_periodic_job
    from scheduling.queue import immediate_queue

    make_node(cards=8)
    make_task(tenant=tenant, gpu_required=1)
    make_task(tenant=tenant, gpu_required=16)
    immediate_queue.drain()
    assert not immediate_queue.work_waiting()

    response = admin_web.post("/diagnostics/", **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 200
    assert fragment.lstrip().startswith('<div id="cycle-request"')
    assert "waiting for the scheduler" in fragment
    assert not CycleRecord.objects.exists(), "the request itself runs no cycle"
    assert immediate_queue.work_waiting()
    follow_up = re.search(r'hx-get="([^"]+)"', fragment)[1].replace("&amp;", "&")
    assert "waiting for the scheduler" in admin_web.get(follow_up, HTTP_HX_TARGET="cycle-request",
                                                         **HTMX).content.decode()

    assert " bound=1 " in run_periodic_job("immediate-cycle")
    assert not immediate_queue.work_waiting(), "the cycle took the request"
    cycle = CycleRecord.objects.get()
    outcome = admin_web.get(follow_up, HTTP_HX_TARGET="cycle-request", **HTMX).content.decode()
    assert "it considered 2 pending tasks, bound 1, 1 could not be placed" in outcome
    assert "hx-trigger" not in outcome, "the note stops asking once it has the answer"
    assert f'id="cycle-{cycle.id}"' in admin_web.get("/diagnostics/", **HTMX).content.decode()


@pytest.mark.django_db
def test_run_a_cycle_now_says_so_when_no_scheduler_answers(admin_web):
    asked = int(time.time()) - 11
    outcome = admin_web.get(f"/diagnostics/?after=0&asked={asked}", HTTP_HX_TARGET="cycle-request",
                            **HTMX).content.decode()
    assert "No cycle ran within 10 s of the request: is the scheduler running" in outcome


@pytest.mark.django_db
def test_run_a_cycle_without_htmx_redirects_back(admin_web):
    response = admin_web.post("/diagnostics/")
    assert response.status_code == 302 and response["Location"] == "/diagnostics/"


@pytest.mark.django_db
def test_diagnostics_and_the_task_page_show_a_parked_task_with_its_reason_and_when_it_is_retried(
    admin_web, tenant_web, tenant, monkeypatch
):
    from scheduling.cycle.run import run_cycle
    from scheduling.queue import services

    # A first backoff of 1 s can run out before the pages are read on a loaded machine.
    monkeypatch.setattr(services, "BACKOFF_INITIAL_SECONDS", 60)

    make_node(cards=1)
    make_node(cards=8, status="offline")  # they could fit when it is back: waiting, not NeverFits
    task = make_task(tenant=tenant, gpu_required=4)
    waiting = make_task(tenant=tenant, gpu_required=8, priority=10)
    run_cycle()
    make_task(tenant=tenant, gpu_required=8, name="never-tried")

    page = admin_web.get("/diagnostics/").content.decode()
    row = page[page.index(f'id="pending-{task.id}"'):].split("</tr>", 1)[0]
    assert "<code>InsufficientResources</code>" in row and "parked" in row and "retried at" in row
    fresh = page[page.index("never-tried"):].split("</tr>", 1)[0]
    assert "active" in fresh and "parked" not in fresh

    detail = tenant_web.get(f"/tasks/{waiting.id}/").content.decode()
    state = detail[detail.index('id="queue-state"'):].split("</div>", 1)[0]
    assert "parked" in state and "retried at" in state and "cards free" in state


@pytest.mark.django_db
def test_dashboard_fragmentation_shows_the_fgd_fragment_beside_the_k_card_bars(tenant_web, tenant, fgd_window):
    make_node(cards=1)
    make_node(cards=4)
    for _ in range(3):
        fgd_window(make_task(tenant=tenant, gpu_required=2))
    page = tenant_web.get("/").content.decode()
    panel = page[page.index("Fragmentation"):]
    # A 2-card task cannot use the 1-card node: 1 of the 5 idle cards is a fragment.
    assert 'aria-label="Fragmentation: 5 free cards, 1.0 of 5.0 idle cards fragmented' in panel
    assert "<title>FGD fragment: 1.0 cards</title>" in panel and "20.0 %" in panel


@pytest.mark.django_db
def test_diagnostics_page_lists_the_target_workload(admin_web, tenant, fgd_window):
    for cards in (1, 1, 4):
        fgd_window(make_task(tenant=tenant, gpu_required=cards, cpu_cores=2))
    page = admin_web.get("/diagnostics/").content.decode()
    workload = page[page.index('id="target-workload"'):]
    assert "last 3 of up to" in workload
    assert "<td>1×card, 2 CPU</td><td class=\"num\">66.7 %</td>" in workload
    assert "<td>4×card, 2 CPU</td><td class=\"num\">33.3 %</td>" in workload
