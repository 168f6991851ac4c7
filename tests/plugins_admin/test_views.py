import re

import pytest
from django.test import Client

from plugins_admin.models import NotificationChannel, PluginChange
from plugins_admin.services import plugin_update
from scheduling.models import PluginConfig

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def _row(html: str, name: str) -> str:
    match = re.search(rf'<tr id="plugin-{re.escape(name)}".*?</tr>', html, re.DOTALL)
    assert match, f"no row for {name}"
    return match.group(0)


def _switch_is_on(html: str, name: str) -> bool:
    switch = re.search(r'<input type="checkbox" role="switch"[^>]*>', _row(html, name), re.DOTALL).group(0)
    return " checked" in switch


def _toggle(client, name: str, enabled: bool, **extra):
    # The form sends a hidden "false" and, when the switch is on, the checkbox's "true" after it.
    values = ["false", "true"] if enabled else ["false"]
    return client.post("/plugins/", {"form": "toggle", "name": name, "enabled": values}, **extra)


def test_staff_see_every_plugin_with_its_switch(staff_page_client):
    response = staff_page_client.get("/plugins/")

    assert response.status_code == 200
    html = response.content.decode()
    for name in ["resource-filter", "gpu-filter", "spread", "binpack", "nvlink", "topology", "rdma", "preempt"]:
        _row(html, name)
    assert _switch_is_on(html, "spread") and not _switch_is_on(html, "binpack")
    assert "exclusive with binpack" in _row(html, "spread")
    for locked in ["resource-filter", "gpu-filter"]:
        row = _row(html, locked)
        assert "disabled" in row and "Always on" in row
    assert 'name="setting-preempt_stage"' in _row(html, "preempt")
    assert 'id="scheduler-panel"' in html and 'id="plugin-history"' in html
    assert 'id="channel-webhook"' in html and 'id="channel-email"' in html
    assert "css/plugins.css" in html


def test_tenants_are_refused(tenant_page_client):
    assert tenant_page_client.get("/plugins/").status_code == 403
    assert _toggle(tenant_page_client, "binpack", True, **HTMX).status_code == 403
    assert not PluginConfig.objects.get(name="binpack").enabled


def test_anonymous_visitors_are_sent_to_sign_in():
    response = Client().get("/plugins/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/plugins/")


def test_enabling_binpack_returns_the_table_with_spread_off_and_the_new_scheduler_set(staff_page_client):
    response = _toggle(staff_page_client, "binpack", True, **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="plugin-table"')
    assert _switch_is_on(html, "binpack") and not _switch_is_on(html, "spread")
    panel = re.search(r'<section id="scheduler-panel".*?</section>', html, re.DOTALL).group(0)
    assert 'hx-swap-oob="true"' in panel
    assert "<code>binpack</code>" in panel and "<code>spread</code>" not in panel
    history = re.search(r'<section id="plugin-history".*?</section>', html, re.DOTALL).group(0)
    assert 'hx-swap-oob="true"' in history and "<code>binpack</code>" in history
    assert "<html" not in html


def test_fgd_is_on_the_page_off_by_default_and_enabling_it_turns_spread_off(staff_page_client):
    html = staff_page_client.get("/plugins/").content.decode()
    assert not _switch_is_on(html, "fgd") and "Fragmentation Gradient Descent" in _row(html, "fgd")

    html = _toggle(staff_page_client, "fgd", True, **HTMX).content.decode()

    assert _switch_is_on(html, "fgd") and not _switch_is_on(html, "spread") and not _switch_is_on(html, "binpack")
    panel = re.search(r'<section id="scheduler-panel".*?</section>', html, re.DOTALL).group(0)
    assert "<code>fgd</code>" in panel and "<code>spread</code>" not in panel


def test_disabling_a_plugin_from_the_page(staff_page_client):
    html = _toggle(staff_page_client, "rdma", False, **HTMX).content.decode()

    assert not _switch_is_on(html, "rdma")
    assert not PluginConfig.objects.get(name="rdma").enabled


def test_a_forged_disable_of_a_locked_filter_shows_the_error_and_changes_nothing(staff_page_client):
    response = _toggle(staff_page_client, "gpu-filter", False, **HTMX)

    html = response.content.decode()
    assert "always on and cannot be disabled" in _row(html, "gpu-filter")
    assert PluginConfig.objects.get(name="gpu-filter").enabled
    assert not PluginChange.objects.exists()


def test_a_bad_weight_is_shown_beside_the_field(staff_page_client):
    response = staff_page_client.post("/plugins/", {"form": "weight", "name": "topology", "weight": "250"}, **HTMX)

    row = _row(response.content.decode(), "topology")
    assert 'class="field-error"' in row and "0 to 100" in row
    assert 'value="250"' in row
    assert PluginConfig.objects.get(name="topology").weight == 1


def test_a_weight_is_saved_from_the_page(staff_page_client):
    response = staff_page_client.post("/plugins/", {"form": "weight", "name": "topology", "weight": "12"}, **HTMX)

    assert "× 12" in response.content.decode()
    assert PluginConfig.objects.get(name="topology").weight == 12


def test_the_preempt_stage_select(staff_page_client):
    response = staff_page_client.post("/plugins/", {"form": "settings", "name": "preempt",
                                                    "setting-preempt_stage": "scheduled"}, **HTMX)

    assert '<option value="scheduled" selected>' in _row(response.content.decode(), "preempt")
    assert PluginConfig.objects.get(name="preempt").extra == {"preempt_stage": "scheduled"}

    bad = staff_page_client.post("/plugins/", {"form": "settings", "name": "preempt",
                                               "setting-preempt_stage": "soon"}, **HTMX)
    assert "preempt_stage must be one of" in _row(bad.content.decode(), "preempt")


def test_without_htmx_a_change_redirects_back_to_the_page(staff_page_client):
    response = _toggle(staff_page_client, "binpack", True)

    assert response.status_code == 302 and response["Location"] == "/plugins/"
    assert PluginConfig.objects.get(name="binpack").enabled


def test_unknown_plugin_or_operation(staff_page_client):
    assert _toggle(staff_page_client, "magic", True, **HTMX).status_code == 404
    assert staff_page_client.post("/plugins/", {"form": "explode"}, **HTMX).status_code == 400


def test_posts_without_a_csrf_token_are_refused(admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)

    refused = _toggle(client, "binpack", True, **HTMX)
    assert refused.status_code == 403
    assert not PluginConfig.objects.get(name="binpack").enabled

    client.get("/plugins/")
    accepted = _toggle(client, "binpack", True, HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value, **HTMX)
    assert accepted.status_code == 200
    assert PluginConfig.objects.get(name="binpack").enabled


def test_the_page_sends_the_csrf_token_with_every_htmx_request(admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)

    html = client.get("/plugins/").content.decode()

    assert re.search(r'<body hx-headers=\'\{"X-CSRFToken": "[^"]+"\}\'', html)


def test_saving_a_channel_with_a_bad_url_shows_the_error_beside_the_field(staff_page_client):
    response = staff_page_client.post("/plugins/", {"form": "channel", "kind": "webhook", "enabled": ["false", "true"],
                                                    "target": "hooks.example.com", "events": ["failed"]}, **HTMX)

    html = response.content.decode()
    assert html.lstrip().startswith('<section id="channel-webhook"')
    field = re.search(r'<div class="field has-error">.*?</div>\s*<div class="hint">', html, re.DOTALL).group(0)
    assert 'value="hooks.example.com"' in field and "valid http:// or https:// URL" in field
    assert not NotificationChannel.objects.get(kind="webhook").enabled


def test_saving_a_channel_then_sending_a_test(staff_page_client, webhook_receiver):
    saved = staff_page_client.post("/plugins/", {"form": "channel", "kind": "webhook", "enabled": ["false", "true"],
                                                 "target": webhook_receiver.url, "events": ["failed", "succeeded"]},
                                   **HTMX)
    html = saved.content.decode()
    assert "Saved" in html and "Enabled" in html
    assert re.search(r'<section id="plugin-history"[^>]*hx-swap-oob="true"', html)
    channel = NotificationChannel.objects.get(kind="webhook")
    assert (channel.enabled, channel.target, channel.events) == (True, webhook_receiver.url, ["failed", "succeeded"])

    tested = staff_page_client.post("/plugins/", {"form": "channel-test", "kind": "webhook"}, **HTMX)
    result = tested.content.decode()
    assert result.lstrip().startswith('<span id="test-result-webhook"')
    assert "Delivered" in result and "HTTP 204" in result
    assert webhook_receiver.requests[0]["json"]["event"] == "test"


def test_a_failing_test_shows_the_failure_inline(staff_page_client, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    empty = staff_page_client.post("/plugins/", {"form": "channel-test", "kind": "email"}, **HTMX).content.decode()
    assert "Failed" in empty and "save an address first" in empty

    staff_page_client.post("/plugins/", {"form": "channel", "kind": "email", "enabled": ["false"],
                                         "target": "ops@example.com", "events": ["failed"]}, **HTMX)
    sent = staff_page_client.post("/plugins/", {"form": "channel-test", "kind": "email"}, **HTMX).content.decode()
    assert "Delivered" in sent and "ops@example.com" in sent


def test_a_custom_plugin_gets_a_row_with_its_settings_editable(settings, staff_page_client):
    settings.HETEROFLOW_EXTRA_PLUGINS = ["tests.example_plugins.cool_cards.factory"]

    row = _row(staff_page_client.get("/plugins/").content.decode(), "cool-cards")
    assert "max_temperature" in row and 'name="weight"' in row and 'value="2"' in row

    bad = staff_page_client.post("/plugins/", {"form": "settings", "name": "cool-cards",
                                               "setting-max_temperature": "hot"}, **HTMX)
    assert "enter a number" in _row(bad.content.decode(), "cool-cards")
    refused = staff_page_client.post("/plugins/", {"form": "settings", "name": "cool-cards",
                                                   "setting-max_temperature": "500"}, **HTMX)
    assert "max_temperature must be a number from 1 to 119" in _row(refused.content.decode(), "cool-cards")

    staff_page_client.post("/plugins/", {"form": "settings", "name": "cool-cards", "setting-max_temperature": "70"},
                           **HTMX)
    assert PluginConfig.objects.get(name="cool-cards").extra == {"max_temperature": 70}


def test_the_scheduler_panel_refreshes_alone_and_shows_changes_made_elsewhere(staff_page_client, admin_user):
    plugin_update(name="topology", weight=42, actor=admin_user)

    response = staff_page_client.get("/plugins/", HTTP_HX_TARGET="scheduler-panel", **HTMX)

    html = response.content.decode()
    assert html.lstrip().startswith('<section id="scheduler-panel"')
    assert "× 42" in html and "<html" not in html
    assert 'hx-trigger="every 15s"' in html


def test_a_settings_preview_out_of_bounds_is_refused_beside_the_field_and_a_valid_one_fills_the_what_if_card(
        staff_page_client):
    refused = staff_page_client.post("/plugins/", {"form": "settings-preview", "name": "defrag",
                                                   "setting-max_moves": "99", "setting-moves_per_hour": "20"}, **HTMX)

    assert refused["HX-Retarget"] == "#plugin-table"
    assert "max_moves must be a whole number from 1 to 8" in _row(refused.content.decode(), "defrag")

    previewed = staff_page_client.post("/plugins/", {"form": "settings-preview", "name": "defrag",
                                                     "setting-max_moves": "3", "setting-moves_per_hour": "20"}, **HTMX)

    card = previewed.content.decode()
    assert 'id="what-if-result"' in card and "&quot;max_moves&quot;: 3" in card
    assert not PluginConfig.objects.filter(name="defrag").exists()
