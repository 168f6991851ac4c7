import re

import pytest

from scheduling.models import Task
from tests.factories import make_task


@pytest.fixture
def tasks(tenant):
    return [make_task(tenant=tenant) for _ in range(7)]


def _ids(response) -> list[int]:
    return [task["id"] for task in response.json()]


@pytest.mark.django_db
def test_a_page_is_a_plain_array_newest_first_with_the_total_and_the_next_page_in_headers(tenant_client, tasks):
    response = tenant_client.get("/api/v1/tasks?limit=3")

    assert response.status_code == 200
    assert _ids(response) == [task.id for task in reversed(tasks)][:3]
    assert response["X-Total-Count"] == "7"
    next_url = re.search(r'<([^>]+)>; rel="next"', response["Link"]).group(1)
    assert "limit=3" in next_url and "offset=3" in next_url
    assert 'rel="prev"' not in response["Link"]


@pytest.mark.django_db
def test_following_the_links_reads_every_task_once(tenant_client, tasks):
    seen, url = [], "/api/v1/tasks?limit=3"
    while url:
        response = tenant_client.get(url)
        seen += _ids(response)
        found = re.search(r'<([^>]+)>; rel="next"', response.get("Link", ""))
        url = found.group(1) if found else None
    assert sorted(seen) == sorted(task.id for task in tasks) and len(seen) == 7


@pytest.mark.django_db
def test_without_a_limit_a_page_holds_the_default_hundred(tenant_client, tenant):
    Task.objects.bulk_create([Task(tenant=tenant, name=f"bulk-{index}") for index in range(105)])

    response = tenant_client.get("/api/v1/tasks")

    assert len(response.json()) == 100 and response["X-Total-Count"] == "105"


@pytest.mark.django_db
@pytest.mark.parametrize("query,field", [
    ("limit=0", "limit"), ("limit=501", "limit"), ("limit=ten", "limit"), ("limit=²", "limit"),
    ("offset=-1", "offset"), ("offset=99999999999", "offset"),
])
def test_a_bad_limit_or_offset_is_a_400_naming_it(tenant_client, tasks, query, field):
    response = tenant_client.get(f"/api/v1/tasks?{query}")

    assert response.status_code == 400
    assert field in response.json()["errors"]


@pytest.mark.django_db
def test_the_total_counts_only_the_tenants_own_tasks(tenant_client, tasks, other_tenant):
    make_task(tenant=other_tenant)

    assert tenant_client.get("/api/v1/tasks")["X-Total-Count"] == "7"


@pytest.mark.django_db
@pytest.mark.parametrize("query,field", [("tenant=null", "tenant"), ("status=sleeping", "status")])
def test_a_bad_filter_is_a_400_in_the_apis_error_shape(tenant_client, query, field):
    body = tenant_client.get(f"/api/v1/tasks?{query}").json()

    assert body["code"] and body["message"] and field in body["errors"]


@pytest.fixture
def attempted(tenant):
    from scheduling.models import SchedulingAttempt

    task = make_task(tenant=tenant)
    SchedulingAttempt.objects.create(
        task=task, code="InsufficientResources", message="0/2 nodes are available: 2 Insufficient GPU.",
        nodes={"filtered": {"Insufficient GPU": ["a", "b"]}, "plugins": [], "scored": []})
    return task


@pytest.mark.django_db
def test_a_summary_list_carries_each_attempts_code_and_message_only(tenant_client, attempted):
    listed = tenant_client.get("/api/v1/tasks?diagnostics=summary").json()

    assert listed[0]["diagnostics"] == {"code": "InsufficientResources",
                                        "message": "0/2 nodes are available: 2 Insufficient GPU."}
    full = tenant_client.get("/api/v1/tasks").json()[0]["diagnostics"]
    assert [entry["node"] for entry in full["nodes"]] == ["a", "b"]


@pytest.mark.django_db
def test_an_unknown_diagnostics_mode_is_a_400_naming_it(tenant_client, attempted):
    response = tenant_client.get("/api/v1/tasks?diagnostics=everything")

    assert response.status_code == 400 and "diagnostics" in response.json()["errors"]
