"""The Django admin shows the plugin tables read-only: every change goes through the plugin services (design
§17.1), so no admin form can store two layouts enabled, an unchecked setting or a change without its history."""

import pytest
from django.test import Client

from plugins_admin.models import PluginChange
from scheduling.models import PluginConfig


@pytest.fixture
def staff_page_client(admin_user):
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.mark.django_db
def test_a_plugin_row_is_shown_but_not_changed_through_the_admin(staff_page_client):
    spread = PluginConfig.objects.get(name="spread")
    page = f"/admin/scheduling/pluginconfig/{spread.id}/change/"

    shown = staff_page_client.get(page)
    refused = staff_page_client.post(page, {"name": "spread", "enabled": "", "weight": "5", "extra": "{}"})

    assert shown.status_code == 200 and b'name="_save"' not in shown.content
    assert refused.status_code == 403
    spread.refresh_from_db()
    assert (spread.enabled, spread.weight) == (True, 1)
    assert not PluginChange.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("model", ["scheduling/pluginconfig", "plugins_admin/pluginchange",
                                   "plugins_admin/notificationchannel"])
def test_no_plugin_table_takes_additions_through_the_admin(staff_page_client, model):
    assert staff_page_client.get(f"/admin/{model}/").status_code == 200
    assert staff_page_client.get(f"/admin/{model}/add/").status_code == 403
