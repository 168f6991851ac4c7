"""The usage page (design §17.4): chart per day and GPU type, a table, time to start, controls, CSV."""

import re
from datetime import date, datetime, timedelta, timezone as dt_timezone

import pytest

from scheduling import lifecycle
from scheduling.models import Task, UsageRecord
from tests.factories import make_task

pytestmark = pytest.mark.django_db

RANGE = {"from": "2026-11-01", "to": "2026-11-03"}


@pytest.fixture
def records(tenant, other_tenant):
    for owner, day, gpu_type, seconds in ((tenant, date(2026, 11, 1), "nvidia", 7200),
                                          (tenant, date(2026, 11, 1), "ascend", 3600),
                                          (tenant, date(2026, 11, 3), "nvidia", 1800),
                                          (other_tenant, date(2026, 11, 2), "nvidia", 36000)):
        UsageRecord.objects.create(tenant=owner, day=day, gpu_type=gpu_type, task_type="batch", card_seconds=seconds)


def _days(page: str) -> dict[str, str]:
    return dict(re.findall(r'class="usage-day" data-day="([\d-]+)" data-total="([\d.]+)"', page))


def test_the_chart_stacks_each_day_by_gpu_type_with_empty_days_too(admin_web, records):
    page = admin_web.get("/usage/", RANGE).content.decode()

    assert _days(page) == {"2026-11-01": "3.000", "2026-11-02": "10.000", "2026-11-03": "0.500"}
    assert "2026-11-01 · ascend: 1.0 card-hours" in page and "2026-11-01 · nvidia: 2.0 card-hours" in page
    assert 'href="/api/v1/usage?from=2026-11-01&amp;to=2026-11-03&amp;group_by=tenant%2Cgpu_type%2Cday&amp;format=csv"' in page


def test_a_tenant_sees_only_its_own(tenant_web, records, other_tenant):
    page = tenant_web.get("/usage/", {**RANGE, "group_by": ["tenant"]}).content.decode()

    assert _days(page)["2026-11-02"] == "0.000"
    table = re.search(r'id="usage-table".*?</table>', page, re.S)[0]
    assert other_tenant.name not in table and "<td>acme</td><td class=\"num\">3.50</td>" in table


def test_the_htmx_request_gets_the_report_alone(admin_web, records):
    page = admin_web.get("/usage/", {**RANGE, "group_by": ["gpu_type", "task_type"]}, HTTP_HX_REQUEST="true")

    body = page.content.decode()
    assert body.lstrip().startswith('<div id="usage-report">') and "<html" not in body
    assert "<td>nvidia</td><td>batch</td><td class=\"num\">12.50</td>" in body


@pytest.mark.parametrize("query, field", [({"from": "2026-11-05", "to": "2026-11-01"}, "from"),
                                          ({"group_by": ["colour"]}, "group_by"),
                                          ({"to": "soon"}, "to")])
def test_bad_controls_show_the_error_beside_the_field(tenant_web, query, field):
    response = tenant_web.get("/usage/", query)

    assert response.status_code == 400
    assert re.search(rf'<div class="field-error" data-field="{field}">', response.content.decode())
    assert 'id="usage-chart"' not in response.content.decode()


def test_time_to_start_per_day_gives_p50_and_p99(tenant_web, tenant):
    day = datetime(2026, 11, 2, 10, 0, tzinfo=dt_timezone.utc)
    for waited in range(0, 101):
        task = make_task(tenant=tenant, status=lifecycle.SUCCEEDED, started_at=day)
        Task.objects.filter(id=task.id).update(created_at=day - timedelta(seconds=waited))

    page = tenant_web.get("/usage/", RANGE).content.decode()

    row = re.search(r'<tr data-day="2026-11-02">(.*?)</tr>', page, re.S)[1]
    assert re.sub(r"<[^>]+>", "|", row).split("|")[1::2] == ["2026-11-02", "101", "50 s", "99 s"]


def test_signed_out_is_sent_to_log_in(client):
    assert client.get("/usage/").status_code == 302


def test_to_htmx_a_refusal_is_the_form_with_its_errors(tenant_web):
    response = tenant_web.get("/usage/", {"from": "2026-11-05", "to": "2026-11-01"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert '<div class="field-error" data-field="from">' in response.content.decode()
