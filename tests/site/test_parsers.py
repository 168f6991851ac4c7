"""Every API body is JSON whose strings PostgreSQL can store: NUL and lone surrogates are a 400 naming the field,
never a 500 from the database (found by the schema fuzzer in a plugin's `extra`)."""

import pytest

from scheduling.models import PluginConfig, Task


# A plugin whose settings are free-form (no settings schema): what reaches the database is whatever the body holds.
FREE_FORM = "gatekeeper"


@pytest.fixture(autouse=True)
def _free_form_plugin(settings):
    settings.HETEROFLOW_EXTRA_PLUGINS = [f"tests.example_plugins.{FREE_FORM}.factory"]


def _put_plugin(client, body: str):
    return client.put(f"/api/v1/plugins/{FREE_FORM}", body, content_type="application/json")


@pytest.mark.django_db
@pytest.mark.parametrize("body,field", [
    ('{"extra": {"note": "\\u0000"}}', "extra.note"),
    ('{"extra": {"levels": [1, "\\udbe3"]}}', "extra.levels[1]"),
    ('{"extra": {"\\udbe3": 1}}', "extra"),
    ('{"\\u0000": 1}', "body"),
])
def test_text_postgresql_cannot_store_is_a_400_naming_where_it_is(admin_client, body, field):
    before = list(PluginConfig.objects.values_list("name", "extra", "weight"))

    response = _put_plugin(admin_client, body)

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert list(PluginConfig.objects.values_list("name", "extra", "weight")) == before


@pytest.mark.django_db
def test_any_other_unicode_is_kept(admin_client):
    response = _put_plugin(admin_client, '{"extra": {"备注": "北京 · 上海 🚀"}}')

    assert response.status_code == 200, response.json()
    assert PluginConfig.objects.get(name=FREE_FORM).extra == {"备注": "北京 · 上海 🚀"}


@pytest.mark.django_db
def test_a_task_label_with_nul_is_refused_the_same_way(tenant_client):
    response = tenant_client.post("/api/v1/tasks", '{"name": "t", "type": "batch", "labels": {"team": "a\\u0000b"}}',
                                  content_type="application/json")

    assert response.status_code == 400 and "labels.team" in response.json()["errors"]
    assert not Task.objects.exists()
