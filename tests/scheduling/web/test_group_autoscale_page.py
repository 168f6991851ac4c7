"""design §17.2: the group page draws the autoscaler's last hour (desired and ready replicas, the metric per replica
against its target: inline SVG, no script, no CDN) and the group's timeline with each decision's figures, in the page
and its live fragment; another tenant's group stays a 404."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.groups.autoscale import autoscale_groups
from scheduling.groups.services import task_group_create
from scheduling.models import GroupMetricSample
from scheduling.services.task_transition import task_transition
from tests.factories import make_node
from tests.web_clients import HTMX

pytestmark = pytest.mark.django_db

SPEC = {"min": 1, "max": 4, "metric": "queue_length", "target": 5.0, "scale_down_delay_seconds": 300}


@pytest.fixture
def autoscaled(tenant):
    node = make_node(cards=4)
    group = task_group_create(tenant=tenant, name="svc", type="inference", world_size=1, gpus_per_worker=1,
                              image="vllm:1", replicas=1, autoscale=SPEC)
    task = group.members.get()
    task_transition(task.id, "pending", "scheduled", node=node, gpus=[0])
    task_transition(task.id, "scheduled", "running")
    return group


def test_the_page_draws_the_last_hour_and_the_timeline_with_figures(tenant_web, autoscaled):
    now = timezone.now()
    GroupMetricSample.objects.create(group=autoscaled, at=now - timedelta(hours=2), desired=9, ready=9, value=1,
                                     proposed=9)  # older than the hour: not drawn
    autoscaled.members.update(metric_value=12, metric_at=now)
    autoscale_groups(now=now)

    page = tenant_web.get(f"/groups/{autoscaled.id}/").content.decode()

    assert 'id="group-autoscale"' in page and "<svg" in page and "<script" not in page.split('id="group-autoscale"')[1]
    assert 'id="autoscale-desired"' in page and 'id="autoscale-metric"' in page
    assert "autoscaled 1 → 3" in page and "sum 12.0" in page
    fragment = tenant_web.get(f"/groups/{autoscaled.id}/", **HTMX).content.decode()
    assert 'id="group-timeline"' in fragment and "autoscaled 1 → 3" in fragment and "<html" not in fragment


def test_without_ticks_the_chart_says_so(tenant_web, autoscaled):
    page = tenant_web.get(f"/groups/{autoscaled.id}/").content.decode()
    assert "No autoscaler tick in the last hour." in page


def test_another_tenants_group_page_is_a_404(other_tenant_web, autoscaled):
    assert other_tenant_web.get(f"/groups/{autoscaled.id}/").status_code == 404
