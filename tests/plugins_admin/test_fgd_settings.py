"""fgd's settings (design §15.9): the measured best are stored as its defaults, and an admin edits them on the plugin
table and tries them in the "Preview a change" card, refused beside the field when the plugin rejects them."""

import re
from importlib import import_module

import pytest

from plugins_admin.models import PluginChange
from scheduling.models import PluginConfig
from tests.plugins_admin.conftest import _models_at
from tests.web_clients import HTMX

pytestmark = pytest.mark.django_db

FIRST_DEFAULTS = {"tie_break": "best-fit", "cpu_weight": 1}
DEFAULTS = {"tie_break": "best-fit", "cpu_weight": 1, "gap_weight": 3, "gap_horizon": 50}
MIGRATION = ("plugins_admin", "0005_fgd_default_settings")
GAP_MIGRATION = ("plugins_admin", "0006_fgd_gap_settings")


def _row(html: str, row_id: str) -> str:
    match = re.search(rf'<tr id="{re.escape(row_id)}".*?</tr>', html, re.DOTALL)
    assert match, f"no row {row_id}"
    return match.group(0)


def _field(html: str, field_id: str) -> str:
    """A settings field of the plugin table: from its box to the next field's or the form's button."""
    match = re.search(rf'id="{re.escape(field_id)}".*?(?=<div class="field[ "]|<button)', html, re.DOTALL)
    assert match, f"no field {field_id}"
    return match.group(0)


def _fgd_extra() -> dict:
    return PluginConfig.objects.get(name="fgd").extra


def _store_defaults() -> None:
    import_module(f"{MIGRATION[0]}.migrations.{MIGRATION[1]}").store_fgd_defaults(_models_at(MIGRATION), None)
    import_module(f"{GAP_MIGRATION[0]}.migrations.{GAP_MIGRATION[1]}").store_gap_defaults(
        _models_at(GAP_MIGRATION), None)


def test_the_migrations_store_the_defaults_but_keep_an_admins_choice():
    PluginConfig.objects.filter(name="fgd").update(extra={})
    _store_defaults()
    assert _fgd_extra() == DEFAULTS

    # A row on the first migration's defaults gets the gap look-ahead; an admin's own choice is left alone.
    PluginConfig.objects.filter(name="fgd").update(extra=FIRST_DEFAULTS)
    _store_defaults()
    assert _fgd_extra() == DEFAULTS

    PluginConfig.objects.filter(name="fgd").update(extra={"cpu_weight": 3})
    _store_defaults()
    assert _fgd_extra() == {"cpu_weight": 3}


def test_the_plugin_table_shows_fgds_settings_editable(admin_web):
    row = _row(admin_web.get("/plugins/").content.decode(), "plugin-fgd")

    assert 'name="setting-tie_break"' in row and "best-fit" in row
    assert 'type="number" id="fgd-setting-cpu_weight" name="setting-cpu_weight"' in row


def test_fgds_settings_are_saved_from_the_plugin_table(admin_web):
    body = {"form": "settings", "name": "fgd", "setting-tie_break": "none", "setting-cpu_weight": "2.5"}

    admin_web.post("/plugins/", body, **HTMX)

    assert _fgd_extra() == {"tie_break": "none", "cpu_weight": 2.5}


@pytest.mark.parametrize("key, submitted, message", [
    ("cpu_weight", "11", "cpu_weight must be a number from 0 to 10"),
    ("tie_break", "worst-fit", "tie_break must be one of none|best-fit"),
    ("cpu_weight", "1x", "enter a number"),
])
def test_bad_fgd_settings_on_the_table_are_shown_beside_the_field_and_change_nothing(admin_web, key, submitted,
                                                                                     message):
    response = admin_web.post("/plugins/", {"form": "settings", "name": "fgd", f"setting-{key}": submitted}, **HTMX)

    field = _field(response.content.decode(), f"field-fgd-{key}")
    assert 'class="field-error"' in field and message in field
    assert _fgd_extra() == DEFAULTS
    assert not PluginChange.objects.exists()


def test_the_preview_card_has_a_settings_field_for_fgd(admin_web):
    card = re.search(r'<section id="what-if-card".*?</section>', admin_web.get("/plugins/").content.decode(),
                     re.DOTALL).group(0)

    row = _row(card, "what-if-fgd")
    assert 'name="settings-fgd"' in row and "best-fit" in row   # the current settings as the placeholder
    assert 'name="settings-spread"' not in card                 # no settings: nothing to try


@pytest.mark.parametrize("submitted, message", [
    ('{"cpu_weight": -1}', "cpu_weight must be a number from 0 to 10"),
    ('{"lookahead": 2}', "unknown fgd setting(s): lookahead"),
    ("cpu_weight=2", "enter a JSON object"),
    ("[1, 2]", "enter a JSON object"),
])
def test_bad_settings_in_the_preview_are_refused_beside_the_field(admin_web, submitted, message):
    body = {"form": "what-if-save", "action-fgd": "enable", "settings-fgd": submitted}

    response = admin_web.post("/plugins/", body, **HTMX)

    row = _row(response.content.decode(), "what-if-fgd")
    assert "field-error" in row and message in row
    assert submitted.replace('"', "&quot;") in row     # what was asked stays in the field
    assert _fgd_extra() == DEFAULTS and not PluginConfig.objects.get(name="fgd").enabled
    assert not PluginChange.objects.exists()


def test_settings_tried_in_the_preview_are_saved_with_save(admin_web):
    body = {"form": "what-if-save", "action-fgd": "enable", "settings-fgd": '{"cpu_weight": 2}'}

    assert admin_web.post("/plugins/", body, **HTMX).status_code == 200

    row = PluginConfig.objects.get(name="fgd")
    assert row.enabled and row.extra == {"cpu_weight": 2}
    assert not PluginConfig.objects.get(name="spread").enabled


def test_a_preview_with_fgd_settings_saves_nothing(admin_web, tenant):
    from tests.factories import make_node, make_task

    make_node(cards=8, name="node-a")
    make_task(tenant=tenant, gpu_required=1, name="job")
    body = {"form": "what-if", "action-fgd": "enable", "settings-fgd": '{"cpu_weight": 2}'}

    response = admin_web.post("/plugins/", body, **HTMX)

    assert response.status_code == 200 and 'id="what-if-result"' in response.content.decode()
    assert _fgd_extra() == DEFAULTS and not PluginChange.objects.exists()
