"""`GET /api/v1/usage` (design §17.4): grouped card-seconds, a tenant's own only, CSV on request, 400s naming the
parameter."""

import csv
import io
from datetime import date, timedelta

import pytest
from django.utils import timezone

from scheduling.models import UsageRecord

pytestmark = pytest.mark.django_db

D1, D2 = date(2026, 11, 1), date(2026, 11, 2)
RANGE = {"from": "2026-11-01", "to": "2026-11-30"}


@pytest.fixture
def records(tenant, other_tenant):
    for owner, day, gpu_type, task_type, seconds in (
            (tenant, D1, "nvidia", "batch", 7200), (tenant, D1, "nvidia", "inference", 3600),
            (tenant, D2, "ascend", "batch", 1800), (other_tenant, D1, "nvidia", "batch", 36000)):
        UsageRecord.objects.create(tenant=owner, day=day, gpu_type=gpu_type, task_type=task_type,
                                   card_seconds=seconds)


def test_an_admin_reads_every_tenants_usage_grouped_as_asked(admin_client, records, tenant, other_tenant):
    response = admin_client.get("/api/v1/usage", {**RANGE, "group_by": "tenant,gpu_type"})

    assert response.status_code == 200
    assert response.json() == [
        {"tenant": tenant.name, "gpu_type": "ascend", "card_seconds": 1800.0, "card_hours": 0.5},
        {"tenant": tenant.name, "gpu_type": "nvidia", "card_seconds": 10800.0, "card_hours": 3.0},
        {"tenant": other_tenant.name, "gpu_type": "nvidia", "card_seconds": 36000.0, "card_hours": 10.0},
    ]


def test_a_tenant_reads_only_its_own(tenant_client, records, tenant):
    response = tenant_client.get("/api/v1/usage", {**RANGE, "group_by": "tenant,day,task_type"})

    assert [(row["tenant"], row["day"], row["task_type"], row["card_seconds"]) for row in response.json()] == [
        (tenant.name, "2026-11-01", "batch", 7200.0), (tenant.name, "2026-11-01", "inference", 3600.0),
        (tenant.name, "2026-11-02", "batch", 1800.0)]


def test_the_range_is_inclusive_and_defaults_to_the_last_thirty_days(admin_client, tenant):
    today = timezone.now().date()
    for days_ago in (0, 29, 30):
        UsageRecord.objects.create(tenant=tenant, day=today - timedelta(days=days_ago), gpu_type="nvidia",
                                   task_type="batch", card_seconds=3600)

    assert admin_client.get("/api/v1/usage", {"group_by": "day"}).json() == [
        {"day": str(today - timedelta(days=29)), "card_seconds": 3600.0, "card_hours": 1.0},
        {"day": str(today), "card_seconds": 3600.0, "card_hours": 1.0}]
    assert len(admin_client.get("/api/v1/usage", {"from": str(today), "to": str(today), "group_by": "day"}).json()) == 1


def test_csv_when_asked(tenant_client, records):
    for response in (tenant_client.get("/api/v1/usage", {**RANGE, "group_by": "gpu_type"}, HTTP_ACCEPT="text/csv"),
                     tenant_client.get("/api/v1/usage", {**RANGE, "group_by": "gpu_type", "format": "csv"})):
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        assert list(csv.DictReader(io.StringIO(response.content.decode()))) == [
            {"gpu_type": "ascend", "card_seconds": "1800.0", "card_hours": "0.5"},
            {"gpu_type": "nvidia", "card_seconds": "10800.0", "card_hours": "3.0"}]


@pytest.mark.parametrize("query, field", [
    ({"from": "2026-11-02", "to": "2026-11-01"}, "from"),
    ({"from": "2025-01-01", "to": "2026-11-01"}, "from"),
    ({"group_by": "tenant,colour"}, "group_by"),
    ({"group_by": ","}, "group_by"),
    ({"to": "yesterday"}, "to"),
])
def test_bad_input_is_a_400_naming_the_parameter_even_for_csv(tenant_client, query, field):
    for extra in ({}, {"HTTP_ACCEPT": "text/csv"}):
        response = tenant_client.get("/api/v1/usage", query, **extra)

        assert response.status_code == 400
        assert response.json()["field"] == field


def test_four_hundred_days_is_the_longest_range(admin_client):
    assert admin_client.get("/api/v1/usage", {"from": "2025-10-03", "to": "2026-11-06"}).status_code == 200
    assert admin_client.get("/api/v1/usage", {"from": "2025-10-02", "to": "2026-11-06"}).status_code == 400


def test_anonymous_is_refused(client):
    assert client.get("/api/v1/usage").status_code in (401, 403)


def test_from_alone_reads_through_today_within_the_longest_range(admin_client, tenant):
    today = timezone.now().date()
    UsageRecord.objects.create(tenant=tenant, day=today, gpu_type="nvidia", task_type="batch", card_seconds=3600)

    assert len(admin_client.get("/api/v1/usage", {"from": str(today - timedelta(days=100))}).json()) == 1
    assert admin_client.get("/api/v1/usage", {"from": str(today - timedelta(days=500))}).json() == []
    assert admin_client.get("/api/v1/usage", {"from": str(today + timedelta(days=3))}).status_code == 200
