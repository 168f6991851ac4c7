"""`GET /api/v1/tasks/{id}/preemption-plan`: the task's tenant or staff; other tenants' victims without ids."""

from tests.factories import make_node, make_task
from tests.scheduling.preemption.conftest import placed_task, set_preempt_stage, statuses


def _url(task) -> str:
    return f"/api/v1/tasks/{task.id}/preemption-plan"


def _full_node_with_a_victim_of(tenant):
    set_preempt_stage("running")
    node = make_node(cards=8, name="node-x")
    return placed_task(tenant=tenant, node=node, gpus=list(range(8)), priority=10, name="victim-batch")


def test_the_tasks_tenant_gets_the_plan_and_nothing_is_evicted(tenant_client, tenant, other_tenant):
    victim = _full_node_with_a_victim_of(other_tenant)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)

    response = tenant_client.get(_url(urgent))

    assert response.status_code == 200
    assert response.json()["node"] == "node-x"
    assert response.json()["victims"] == [{"task": None, "priority": 10}]
    assert "victim-batch" not in response.content.decode()
    assert statuses(victim, urgent) == ["running", "pending"]


def test_staff_see_victims_by_id(admin_client, tenant, other_tenant):
    victim = _full_node_with_a_victim_of(other_tenant)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)

    assert admin_client.get(_url(urgent)).json()["victims"] == [{"task": victim.id, "priority": 10}]


def test_another_tenant_and_anonymous_callers_are_refused(other_tenant_client, client, tenant):
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)

    assert other_tenant_client.get(_url(urgent)).status_code == 404
    assert client.get(_url(urgent)).status_code in (401, 403)


def test_the_plan_has_a_throttle_of_its_own(tenant_client, tenant, settings):
    """issue 27 item 4: apart from the user's general budget, each call plans over the whole cluster."""
    from rest_framework.settings import api_settings
    from rest_framework.throttling import SimpleRateThrottle

    original = SimpleRateThrottle.THROTTLE_RATES
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "preemption_plan": "2/min"}}
    SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
    try:
        urgent = make_task(tenant=tenant, priority=90, gpu_required=8)
        assert [tenant_client.get(_url(urgent)).status_code for _ in range(3)] == [200, 200, 429]
        assert tenant_client.get("/api/v1/tasks").status_code == 200, "the rest of the API is not held back"
    finally:
        SimpleRateThrottle.THROTTLE_RATES = original
