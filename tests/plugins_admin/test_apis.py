import pytest
from rest_framework.test import APIClient

from plugins_admin.models import PluginChange
from scheduling.models import PluginConfig
from scheduling.plugins import BUILTIN_SPECS

pytestmark = pytest.mark.django_db


def _enabled(name: str) -> bool:
    return PluginConfig.objects.get(name=name).enabled


def test_anyone_signed_in_may_read_the_plugins(tenant_client):
    response = tenant_client.get("/api/v1/plugins")

    assert response.status_code == 200
    plugins = {plugin["name"]: plugin for plugin in response.json()}
    assert set(plugins) == {spec.name for spec in BUILTIN_SPECS}
    assert plugins["resource-filter"]["locked"] is True
    assert plugins["replica-spread"]["locked"] is True and plugins["replica-spread"]["enabled"] is True
    assert plugins["preempt"]["extra"] == {"preempt_stage": "running"}
    assert plugins["spread"]["exclusive_with"] == ["binpack", "fgd"]
    assert plugins["fgd"]["enabled"] is False and plugins["fgd"]["exclusive_with"] == ["spread", "binpack"]


def test_anonymous_callers_are_refused():
    assert APIClient().get("/api/v1/plugins").status_code in (401, 403)
    assert APIClient().get("/api/v1/scheduler/plugins").status_code in (401, 403)


def test_tenants_may_not_change_plugins(tenant_client):
    assert tenant_client.post("/api/v1/plugins/binpack?action=enable").status_code == 403
    assert tenant_client.put("/api/v1/plugins/topology", {"weight": 5}, format="json").status_code == 403
    assert tenant_client.get("/api/v1/plugins/history").status_code == 403
    assert not _enabled("binpack")
    assert PluginConfig.objects.get(name="topology").weight == 1


def test_enabling_binpack_changes_the_set_the_scheduler_holds(admin_client):
    response = admin_client.post("/api/v1/plugins/binpack?action=enable")

    assert response.status_code == 200
    assert response.json()["enabled"] is True and response.json()["weight"] == 1
    held = admin_client.get("/api/v1/scheduler/plugins").json()
    names = [scorer["name"] for scorer in held["scorers"]]
    assert "binpack" in names and "spread" not in names
    listed = {plugin["name"]: plugin["enabled"] for plugin in admin_client.get("/api/v1/plugins").json()}
    assert (listed["spread"], listed["binpack"]) == (False, True)


def test_disable_action(admin_client):
    response = admin_client.post("/api/v1/plugins/rdma?action=disable")

    assert response.status_code == 200
    assert not _enabled("rdma")
    assert "rdma" not in [scorer["name"] for scorer in admin_client.get("/api/v1/scheduler/plugins").json()["scorers"]]


@pytest.mark.parametrize("query", ["", "?action=toggle", "?action="])
def test_a_bad_action_is_a_400_naming_action(admin_client, query):
    response = admin_client.post(f"/api/v1/plugins/binpack{query}")

    assert response.status_code == 400
    assert "action" in response.json()["errors"]
    assert not _enabled("binpack")


def test_disabling_a_forced_filter_is_a_403_and_changes_nothing(admin_client):
    response = admin_client.post("/api/v1/plugins/resource-filter?action=disable")

    assert (response.status_code, response.json()["code"]) == (403, "not_allowed")
    assert "always on" in response.json()["errors"]["action"][0]
    assert _enabled("resource-filter")
    assert "resource-filter" in admin_client.get("/api/v1/scheduler/plugins").json()["filters"]


def test_unknown_plugin_is_a_404(admin_client):
    assert admin_client.post("/api/v1/plugins/magic?action=enable").status_code == 404
    assert admin_client.put("/api/v1/plugins/magic", {"weight": 2}, format="json").status_code == 404


def test_put_weight(admin_client):
    response = admin_client.put("/api/v1/plugins/topology", {"weight": 25}, format="json")

    assert response.status_code == 200
    assert response.json()["weight"] == 25
    assert {"name": "topology", "weight": 25} in admin_client.get("/api/v1/scheduler/plugins").json()["scorers"]


def test_put_preempt_stage_reaches_the_scheduler(admin_client):
    response = admin_client.put("/api/v1/plugins/preempt", {"extra": {"preempt_stage": "scheduled"}}, format="json")

    assert response.status_code == 200
    assert response.json()["extra"] == {"preempt_stage": "scheduled"}
    assert admin_client.get("/api/v1/scheduler/plugins").json()["preempt_stage"] == "scheduled"


@pytest.mark.parametrize("body, field", [
    ({"weight": 5, "require_nvlink": True}, "require_nvlink"),
    ({"weight": 101}, "weight"),
    ({"weight": -1}, "weight"),
    ({"weight": "heavy"}, "weight"),
    ({"extra": "running"}, "extra"),
])
def test_bad_put_bodies_are_400s_naming_the_field(admin_client, body, field):
    response = admin_client.put("/api/v1/plugins/topology", body, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert PluginConfig.objects.get(name="topology").weight == 1


@pytest.mark.parametrize("name,extra,field", [
    ("preempt", {"preempt_stage": "sometimes"}, "extra.preempt_stage"),
    ("preempt", {"stage": "running"}, "extra.stage"),
    ("fgd", {"cpu_weight": 11}, "extra.cpu_weight"),
    ("fgd", {"tie_break": 1}, "extra.tie_break"),
    ("defrag", {"max_moves": 2.5}, "extra.max_moves"),
    ("queue-sort", {"order": "random"}, "extra.order"),
    ("spread", {"anything": 1}, "extra.anything"),
])
def test_a_malformed_setting_is_a_400_naming_it_and_nothing_is_written(admin_client, name, extra, field):
    """design §17.1: each plugin's settings are in the published schema, so a setting it refuses is a 400."""
    response = admin_client.put(f"/api/v1/plugins/{name}", {"extra": extra}, format="json")

    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("invalid", field)
    assert not PluginChange.objects.exists() and not PluginConfig.objects.filter(extra=extra).exists()


def test_settings_the_schema_allows_are_accepted(admin_client):
    response = admin_client.put("/api/v1/plugins/defrag", {"extra": {"max_moves": 8, "moves_per_hour": 0}},
                                format="json")

    assert response.status_code == 200 and response.json()["extra"] == {"max_moves": 8, "moves_per_hour": 0}


def test_an_empty_put_is_refused(admin_client):
    assert admin_client.put("/api/v1/plugins/topology", {}, format="json").status_code == 400


def test_history_lists_the_changes_newest_first(admin_client, admin_user):
    admin_client.put("/api/v1/plugins/topology", {"weight": 3}, format="json")
    admin_client.post("/api/v1/plugins/binpack?action=enable")

    history = admin_client.get("/api/v1/plugins/history").json()

    assert [entry["plugin"] for entry in history] == ["spread", "binpack", "topology"]
    assert history[2]["before"]["weight"] == 1 and history[2]["after"]["weight"] == 3
    assert {entry["actor"] for entry in history} == {admin_user.username}
    assert len(admin_client.get("/api/v1/plugins/history?limit=1").json()) == 1
    assert admin_client.get("/api/v1/plugins/history?limit=0").status_code == 400
    assert PluginChange.objects.count() == 3


def test_custom_plugin_is_listed_and_held(settings, admin_client):
    settings.HETEROFLOW_EXTRA_PLUGINS = ["tests.example_plugins.cool_cards.factory"]

    assert "cool-cards" in [plugin["name"] for plugin in admin_client.get("/api/v1/plugins").json()]
    assert admin_client.put("/api/v1/plugins/cool-cards", {"weight": 6}, format="json").status_code == 200
    assert {"name": "cool-cards", "weight": 6} in admin_client.get("/api/v1/scheduler/plugins").json()["scorers"]
    # Its settings schema is published and checked as the built-ins' are (design §17.1).
    bad = admin_client.put("/api/v1/plugins/cool-cards", {"extra": {"max_temperature": "hot"}}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "extra.max_temperature"


def test_notification_channel_api(admin_client, tenant_client, webhook_receiver):
    body = {"enabled": True, "target": webhook_receiver.url, "events": ["failed"]}
    assert tenant_client.put("/api/v1/notification-channels/webhook", body, format="json").status_code == 403

    response = admin_client.put("/api/v1/notification-channels/webhook", body, format="json")
    assert response.status_code == 200
    assert response.json() == {"kind": "webhook", **body}

    bad = admin_client.put("/api/v1/notification-channels/webhook", {**body, "target": "nope"}, format="json")
    # A webhook's URL and an e-mail channel's addresses share one schema: the channel's kind refuses the other's.
    assert bad.status_code == 403 and "target" in bad.json()["errors"]
    assert admin_client.put("/api/v1/notification-channels/pager", body, format="json").status_code == 404

    tested = admin_client.post("/api/v1/notification-channels/webhook/test")
    assert tested.status_code == 200 and tested.json()["ok"] is True
    assert webhook_receiver.requests[-1]["json"]["event"] == "test"
    listing = admin_client.get("/api/v1/notification-channels").json()
    assert [channel["kind"] for channel in listing] == ["webhook", "email"]
