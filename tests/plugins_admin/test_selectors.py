import pytest

from heteroflow_site.errors import DomainError
from plugins_admin.models import NotificationChannel
from plugins_admin.selectors import plugin_listing, scheduler_plugins
from plugins_admin.services import plugin_set_enabled, plugin_update
from scheduling.framework.registry import PluginSetting
from scheduling.models import PluginConfig
from scheduling.selectors import current_plugin_settings

pytestmark = pytest.mark.django_db

CUSTOM_PLUGIN = "tests.example_plugins.cool_cards.factory"

DEFAULT_PLUGIN_SET = {
    "spread": (True, 1, {}),
    "binpack": (False, 0, {}),
    "nvlink": (True, 1, {}),
    "topology": (True, 1, {}),
    "rdma": (True, 1, {}),
    "preempt": (True, 0, {"preempt_stage": "running"}),
    "resource-filter": (True, 1, {}),
    "gpu-filter": (True, 1, {}),
    # design §15.9: its own migration, then the settings the replay measured best.
    "fgd": (False, 0, {"tie_break": "best-fit", "cpu_weight": 1, "gap_weight": 3, "gap_horizon": 50}),
}
# What the scheduler reads: the rows, and the registered defaults of the plugins that have none (design §16.3's
# node-pools and queue-sort, always on, and defrag, off until an admin enables it; §17.3's card-health and §17.2's
# replica-spread, always on).
DEFAULT_SETTINGS = {**DEFAULT_PLUGIN_SET, "node-pools": (True, 1, {}), "model-locality": (True, 1, {}),
                    "card-health": (True, 1, {}), "replica-spread": (True, 2, {}),
                    "defrag": (False, 0, {"max_moves": 4, "moves_per_hour": 20}),
                    "queue-sort": (True, 0, {"order": "priority"})}


def test_the_data_migrations_store_the_spec_defaults(create_default_rows):
    PluginConfig.objects.all().delete()
    NotificationChannel.objects.all().delete()

    create_default_rows()

    rows = {row.name: (row.enabled, row.weight, row.extra) for row in PluginConfig.objects.all()}
    assert rows == DEFAULT_PLUGIN_SET
    channels = {channel.kind: (channel.enabled, channel.target) for channel in NotificationChannel.objects.all()}
    assert channels == {"webhook": (False, ""), "email": (False, "")}


def test_current_plugin_settings_reads_every_row_in_one_query(django_assert_num_queries):
    PluginConfig.objects.filter(name="topology").update(weight=40)

    with django_assert_num_queries(1):
        settings = current_plugin_settings()

    by_name = {setting.name: setting for setting in settings}
    assert set(by_name) == set(DEFAULT_SETTINGS)
    assert by_name["topology"] == PluginSetting("topology", True, 40, {})


def test_a_plugin_without_a_row_uses_its_registered_defaults():
    PluginConfig.objects.all().delete()

    by_name = {setting.name: (setting.enabled, setting.weight, dict(setting.extra))
               for setting in current_plugin_settings()}

    assert by_name == DEFAULT_SETTINGS


def test_a_forced_filter_stays_on_whatever_its_row_says():
    PluginConfig.objects.filter(name="gpu-filter").update(enabled=False)

    gpu_filter = next(setting for setting in current_plugin_settings() if setting.name == "gpu-filter")

    assert gpu_filter.enabled is True
    assert "gpu-filter" in scheduler_plugins()["filters"]


def test_the_scheduler_set_follows_the_stored_rows():
    held = scheduler_plugins()
    assert {"gpu-filter", "resource-filter"} <= set(held["filters"])
    assert {"name": "spread", "weight": 1} in held["scorers"]
    assert "binpack" not in [scorer["name"] for scorer in held["scorers"]]
    assert held["preempt_stage"] == "running"

    PluginConfig.objects.filter(name="preempt").update(enabled=False)
    assert scheduler_plugins()["preempt_stage"] == "disabled"


def test_a_stored_row_with_both_layouts_enabled_scores_as_binpack():
    """A row written past the plugin service (the Django admin before it was read-only, a migration, SQL): the
    scheduler runs binpack, and the page and API say so (design §17.1)."""
    PluginConfig.objects.filter(name__in=["spread", "binpack"]).update(enabled=True, weight=1)

    assert [scorer["name"] for scorer in scheduler_plugins()["scorers"]] == [
        "card-health", "node-pools", "binpack", "nvlink", "topology", "rdma", "model-locality", "replica-spread"]
    listing = {plugin["name"]: plugin["enabled"] for plugin in plugin_listing()}
    assert (listing["binpack"], listing["spread"]) == (True, False)


def test_listing_says_what_the_page_needs():
    listing = {plugin["name"]: plugin for plugin in plugin_listing()}

    assert list(listing)[:3] == ["gpu-filter", "card-health", "resource-filter"]
    assert listing["card-health"]["locked"] is True
    assert listing["resource-filter"]["locked"] is True
    assert listing["resource-filter"]["locked_reason"]
    assert listing["spread"]["locked"] is False and listing["spread"]["locked_reason"] == ""
    assert listing["spread"]["exclusive_with"] == ["binpack", "fgd"]
    assert listing["binpack"]["exclusive_with"] == ["spread", "fgd"]
    assert listing["fgd"]["exclusive_with"] == ["spread", "binpack"]
    assert listing["spread"]["scores"] is True and listing["gpu-filter"]["scores"] is False
    assert listing["preempt"]["extra"] == {"preempt_stage": "running"}
    assert all(plugin["description"] for plugin in listing.values())


def test_a_custom_plugin_from_settings_is_listed_and_held_with_its_defaults(settings, admin_user):
    settings.HETEROFLOW_EXTRA_PLUGINS = [CUSTOM_PLUGIN]

    listing = {plugin["name"]: plugin for plugin in plugin_listing()}
    assert listing["cool-cards"]["weight"] == 2
    assert listing["cool-cards"]["extra"] == {"max_temperature": 75}
    assert listing["cool-cards"]["kinds"] == ["filter", "score"]
    assert listing["cool-cards"]["description"].startswith("cool-cards: an example custom plugin")
    held = scheduler_plugins()
    assert "cool-cards" in held["filters"] and {"name": "cool-cards", "weight": 2} in held["scorers"]

    plugin_update(name="cool-cards", weight=8, actor=admin_user)
    assert {"name": "cool-cards", "weight": 8} in scheduler_plugins()["scorers"]
    plugin_set_enabled(name="cool-cards", enabled=False, actor=admin_user)
    assert "cool-cards" not in scheduler_plugins()["filters"]


def test_a_row_of_a_plugin_no_longer_registered_is_ignored():
    PluginConfig.objects.create(name="retired-plugin", enabled=True, weight=5)

    assert "retired-plugin" not in [setting.name for setting in current_plugin_settings()]
    assert "retired-plugin" not in [plugin["name"] for plugin in plugin_listing()]


def test_a_custom_plugin_checks_its_own_extra(settings, admin_user):
    settings.HETEROFLOW_EXTRA_PLUGINS = [CUSTOM_PLUGIN]

    with pytest.raises(DomainError) as refusal:
        plugin_update(name="cool-cards", extra={"max_temperature": 200}, actor=admin_user)
    assert refusal.value.field == "extra.max_temperature" and refusal.value.status == 400

    plugin_update(name="cool-cards", extra={"max_temperature": 70}, actor=admin_user)
    assert PluginConfig.objects.get(name="cool-cards").extra == {"max_temperature": 70}
