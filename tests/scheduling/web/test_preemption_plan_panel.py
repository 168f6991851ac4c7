"""The task page's preemption plan for pending tasks."""

import re

import pytest

from tests.factories import make_node, make_task
from tests.scheduling.preemption.conftest import placed_task, set_preempt_stage, statuses
from tests.web_clients import HTMX

pytestmark = pytest.mark.django_db


def _panel(html: str) -> str:
    return re.search(r'<div id="preemption-plan".*?(</table>|</div>\s*</div>\s*</div>)', html, re.DOTALL).group(0)


@pytest.fixture
def crowded(tenant, other_tenant):
    set_preempt_stage("running")
    node = make_node(cards=8, name="node-x")
    own = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=10)
    others = placed_task(tenant=other_tenant, node=node, gpus=[4, 5, 6, 7], priority=20, name="secret-batch")
    return own, others


def test_a_pending_task_shows_what_it_would_preempt(tenant_web, tenant, crowded):
    own, others = crowded
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)

    html = tenant_web.get(f"/tasks/{urgent.id}/").content.decode()

    panel = _panel(html)
    assert "Would preempt 2 tasks on node-x" in panel
    assert f'href="/tasks/{own.id}/"' in panel and "a task of another tenant" in panel
    assert f"/tasks/{others.id}/" not in html and "secret-batch" not in html
    assert statuses(own, others) == ["running", "running"]


def test_the_panel_refreshes_itself_as_a_fragment(admin_web, tenant, crowded):
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)

    html = admin_web.get(f"/tasks/{urgent.id}/", HTTP_HX_TARGET="preemption-plan", **HTMX).content.decode()

    assert html.lstrip().startswith('<div id="preemption-plan"')
    assert "Would preempt 2 tasks on node-x" in html and "a task of another tenant" not in html


def test_when_no_eviction_would_help_the_page_says_why(tenant_web, tenant):
    set_preempt_stage("running")
    node = make_node(cards=8, name="node-x")
    placed_task(tenant=tenant, node=node, gpus=list(range(8)), priority=95)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)

    panel = _panel(tenant_web.get(f"/tasks/{urgent.id}/").content.decode())

    assert "No eviction would help" in panel and "no eligible victims" in panel


def test_a_running_task_has_no_panel(tenant_web, tenant):
    node = make_node(cards=8)
    running = placed_task(tenant=tenant, node=node, gpus=[0])

    assert 'id="preemption-plan"' not in tenant_web.get(f"/tasks/{running.id}/").content.decode()


def test_the_live_fragment_polled_every_3_s_plans_nothing(tenant_web, tenant, crowded, monkeypatch):
    """issue 27 item 4: the plan reads the whole cluster; only the page and the panel's own refresh compute it."""
    from scheduling.web import preemption_plan

    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)
    planned = []
    real = preemption_plan.preemption_plan_panel
    monkeypatch.setattr(preemption_plan, "preemption_plan_panel",
                        lambda **kwargs: planned.append(kwargs) or real(**kwargs))

    assert tenant_web.get(f"/tasks/{urgent.id}/", HTTP_HX_TARGET="task-live", **HTMX).status_code == 200
    assert planned == []
    tenant_web.get(f"/tasks/{urgent.id}/", HTTP_HX_TARGET="preemption-plan", **HTMX)
    assert len(planned) == 1


@pytest.fixture
def low_plan_rate(settings):
    from rest_framework.settings import api_settings
    from rest_framework.throttling import SimpleRateThrottle

    original = SimpleRateThrottle.THROTTLE_RATES
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {**original, "preemption_plan": "2/min"}}
    SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
    yield
    SimpleRateThrottle.THROTTLE_RATES = original


def test_the_page_plans_within_the_apis_budget_for_the_user(tenant_web, tenant_client, tenant, crowded, monkeypatch,
                                                            low_plan_rate):
    """The page computed a plan on every load and refresh, without the throttle of the API's plan endpoint."""
    from scheduling.web import preemption_plan

    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)
    planned = []
    real = preemption_plan.preemption_plan_panel
    monkeypatch.setattr(preemption_plan, "preemption_plan_panel",
                        lambda **kwargs: planned.append(kwargs) or real(**kwargs))

    assert tenant_client.get(f"/api/v1/tasks/{urgent.id}/preemption-plan").status_code == 200
    assert "Would preempt" in _panel(tenant_web.get(f"/tasks/{urgent.id}/").content.decode())
    refused = tenant_web.get(f"/tasks/{urgent.id}/", HTTP_HX_TARGET="preemption-plan", **HTMX)
    assert refused.status_code == 200 and "Not planned just now" in refused.content.decode()
    assert 'hx-trigger="every 15s"' in refused.content.decode(), "the panel asks again later"
    assert len(planned) == 1
    assert tenant_client.get(f"/api/v1/tasks/{urgent.id}/preemption-plan").status_code == 429
