"""The published schema states each plugin's settings (design §17.1): per plugin, typed, with enums and bounds, a
custom plugin's as it declares them; a list of changes states them per entry with if/then."""

import pytest

from plugins_admin.api_schema import PLUGIN_PATH


@pytest.fixture
def published(admin_client, settings):
    settings.HETEROFLOW_EXTRA_PLUGINS = ["tests.example_plugins.cool_cards.factory"]
    return admin_client.get("/api/schema/?format=json").json()


def _settings(schema: dict, plugin: str) -> dict:
    body = schema["paths"][f"/api/v1/plugins/{plugin}"]["put"]["requestBody"]["content"]["application/json"]
    reference = body["schema"]["$ref"].rsplit("/", 1)[-1]
    return schema["components"]["schemas"][reference]["properties"]["extra"]


@pytest.mark.django_db
def test_each_plugin_has_a_path_whose_body_states_its_settings(published):
    assert PLUGIN_PATH not in published["paths"]
    assert _settings(published, "preempt")["properties"]["preempt_stage"]["enum"] == ["disabled", "scheduled",
                                                                                      "running"]
    fgd = _settings(published, "fgd")["properties"]
    assert (fgd["cpu_weight"]["type"], fgd["cpu_weight"]["minimum"], fgd["cpu_weight"]["maximum"]) == ("number", 0, 10)
    assert _settings(published, "defrag")["properties"]["max_moves"] | {"description": ""} == {
        "type": "integer", "minimum": 1, "maximum": 8, "default": 4, "description": ""}
    assert _settings(published, "spread") == {"type": "object", "properties": {}, "additionalProperties": False}
    assert _settings(published, "cool-cards")["properties"]["max_temperature"]["maximum"] == 119
    assert {"post", "put"} == set(published["paths"]["/api/v1/plugins/queue-sort"])


@pytest.mark.django_db
def test_a_change_entry_states_the_settings_of_the_plugin_it_names(published):
    rules = published["components"]["schemas"]["PluginChangeInput"]["allOf"]
    by_plugin = {rule["if"]["properties"]["name"]["const"]: rule["then"]["properties"]["extra"] for rule in rules}
    assert by_plugin["preempt"]["properties"]["preempt_stage"]["enum"] == ["disabled", "scheduled", "running"]
    assert by_plugin["cool-cards"]["additionalProperties"] is False
