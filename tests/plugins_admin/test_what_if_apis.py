"""`POST /api/v1/scheduler/what-if`: admins only, the plugin API's body shapes, nothing written, no lock held."""

import threading

import pytest
from django.apps import apps
from django.db import connection, connections

from scheduling.cycle.run import run_cycle
from scheduling.models import Task
from scheduling.what_if import plugin_sets
from tests.factories import make_node, make_task

URL = "/api/v1/scheduler/what-if"
ENABLE_BINPACK = [{"name": "binpack", "action": "enable"}]


def _cluster(tenant):
    for name in ("node-a", "node-b"):
        make_node(cards=8, name=name)
    return [make_task(tenant=tenant, gpu_required=1) for _ in range(6)]


def _database_state() -> dict:
    """Every table's row count and a hash of the whole task table."""
    counts = {model._meta.db_table: model.objects.count() for model in apps.get_models()}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT md5(string_agg(t::text, '|' ORDER BY t.id)) FROM {Task._meta.db_table} t")
        return {"counts": counts, "tasks": cursor.fetchone()[0]}


def test_admin_gets_both_sides_and_the_diff(admin_client, tenant):
    _cluster(tenant)

    response = admin_client.post(URL, [*ENABLE_BINPACK, {"name": "nvlink", "weight": 3}], format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"considered", "gangs", "not_previewed", "current", "proposed", "moved", "newly_placed",
                         "newly_unplaced", "fragmentation"}
    assert len(body["moved"]) == 3
    assert {"task", "from_node", "to_node"} == set(body["moved"][0])
    assert {scorer["name"]: scorer["weight"] for scorer in body["proposed"]["plugins"]["scorers"]}["nvlink"] == 3


def test_tenants_and_anonymous_callers_are_refused(tenant_client, client, tenant):
    _cluster(tenant)

    assert tenant_client.post(URL, ENABLE_BINPACK, format="json").status_code == 403
    assert client.post(URL, ENABLE_BINPACK, content_type="application/json").status_code in (401, 403)


@pytest.mark.parametrize(("body", "field", "status"), [
    ({"name": "binpack", "action": "enable"}, "non_field_errors", 400),
    ([{"name": "binpack", "action": "maybe"}], "[0].action", 400),
    ([{"name": "spread", "weight": 500}], "[0].weight", 400),
    ([{"name": "spread"}], "[0]", 400),
    ([{"name": "spread", "weight": 1, "colour": "red"}], "[0].colour", 400),
    # Bodies the schema allows, refused by a rule and for a missing plugin.
    ([*ENABLE_BINPACK, {"name": "gpu-filter", "action": "disable"}], "[1].enabled", 403),
    ([{"name": "no-such-plugin", "action": "enable"}], "[0].name", 404),
])
def test_a_bad_body_is_refused_naming_the_field(admin_client, tenant, body, field, status):
    response = admin_client.post(URL, body, format="json")

    assert response.status_code == status
    assert field in response.json()["errors"], response.json()


@pytest.mark.django_db(transaction=True)
def test_nothing_in_the_database_changes(admin_client, tenant):
    _cluster(tenant)
    before = _database_state()

    for body in ([], ENABLE_BINPACK, [{"name": "preempt", "extra": {"preempt_stage": "disabled"}}]):
        assert admin_client.post(URL, body, format="json").status_code == 200

    assert _database_state() == before


@pytest.mark.django_db(transaction=True)
def test_a_preview_holds_no_lock_and_a_concurrent_cycle_is_not_blocked(tenant, monkeypatch):
    """The preview is paused inside its read-only transaction while a cycle runs in another thread: the cycle
    binds every task, the preview's connection holds nothing but the table read locks of plain SELECTs, and the
    preview, once let go, answers from the state it began with."""
    tasks = _cluster(tenant)
    inside, release, seen = threading.Event(), threading.Event(), {}
    build_snapshot = plugin_sets.build_snapshot

    def paused_build_snapshot():
        snapshot = build_snapshot()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            seen["pid"] = cursor.fetchone()[0]
        inside.set()
        release.wait(60)
        return snapshot

    monkeypatch.setattr(plugin_sets, "build_snapshot", paused_build_snapshot)

    def preview():
        from plugins_admin.rules import PluginChangeRequest
        from plugins_admin.what_if import plugin_change_preview

        try:
            seen["preview"] = plugin_change_preview(requests=[PluginChangeRequest("binpack", enabled=True)])
        finally:
            connections.close_all()

    def cycle():
        try:
            seen["cycle"] = run_cycle()
        finally:
            connections.close_all()

    previewing = threading.Thread(target=preview)
    previewing.start()
    try:
        assert inside.wait(60)
        with connection.cursor() as cursor:
            cursor.execute("SELECT locktype, mode FROM pg_locks WHERE pid = %s", [seen["pid"]])
            held = set(cursor.fetchall())
        cycling = threading.Thread(target=cycle)
        cycling.start()
        cycling.join(120)
        assert not cycling.is_alive(), "the cycle waited for the preview"
    finally:
        release.set()
        previewing.join(60)

    assert {mode for locktype, mode in held if locktype == "relation"} == {"AccessShareLock"}
    assert {locktype for locktype, _ in held} <= {"relation", "virtualxid"}
    assert seen["cycle"].bound == len(tasks)
    assert set(Task.objects.values_list("status", flat=True)) == {"scheduled"}
    # The preview's one consistent read began before the cycle bound anything.
    assert seen["preview"]["considered"] == len(tasks)
    assert seen["preview"]["current"]["allocation"]["gpu_used"] == len(tasks)
