import pytest

from scheduling.framework.registry import PluginSetting, PluginSpec, Registry, build_plugin_set, validate_extra
from scheduling.framework.settings_schema import SettingError
from scheduling.plugins import default_registry

EXAMPLE = "tests.example_plugins.cool_cards.factory"


def registry():
    return default_registry(extra_plugins=[])


def test_defaults():
    plugin_set = build_plugin_set([], registry())
    assert plugin_set.describe() == {
        "filters": ["gpu-filter", "card-health", "resource-filter", "node-pools", "nvlink", "rdma", "replica-spread"],
        "scorers": [{"name": "card-health", "weight": 1}, {"name": "node-pools", "weight": 1},
                    {"name": "spread", "weight": 1}, {"name": "nvlink", "weight": 1},
                    {"name": "topology", "weight": 1}, {"name": "rdma", "weight": 1},
                    {"name": "model-locality", "weight": 1}, {"name": "replica-spread", "weight": 2}],
        "preempt_stage": "running",
    }


def test_always_on_plugins_cannot_be_disabled():
    plugin_set = build_plugin_set([PluginSetting("gpu-filter", enabled=False),
                                   PluginSetting("card-health", enabled=False),
                                   PluginSetting("resource-filter", enabled=False)], registry())
    assert plugin_set.describe()["filters"][:3] == ["gpu-filter", "card-health", "resource-filter"]


def test_enabled_scorer_with_weight_zero_counts_as_one():
    plugin_set = build_plugin_set([PluginSetting("spread", False, 1), PluginSetting("binpack", True, 0),
                                   PluginSetting("rdma", True, 5)], registry())
    assert {"name": "binpack", "weight": 1} in plugin_set.describe()["scorers"]
    assert {"name": "rdma", "weight": 5} in plugin_set.describe()["scorers"]


@pytest.mark.parametrize("others", [["spread"], ["fgd"], ["spread", "fgd"]])
def test_binpack_wins_if_it_is_somehow_enabled_with_another_layout(others):
    """design §17.1, the seed's "启用时 binpack 优先"."""
    settings = [PluginSetting("binpack", True, 3), *(PluginSetting(name, True, 1) for name in others)]
    names = [scorer["name"] for scorer in build_plugin_set(settings, registry()).describe()["scorers"]]
    assert "binpack" in names and not set(others) & set(names)


def test_of_spread_and_fgd_both_enabled_the_one_registered_first_is_kept():
    plugin_set = build_plugin_set([PluginSetting("spread", True, 1), PluginSetting("fgd", True, 1)], registry())
    names = [scorer["name"] for scorer in plugin_set.describe()["scorers"]]
    assert "spread" in names and "fgd" not in names


def test_disabled_plugins_are_left_out():
    plugin_set = build_plugin_set([PluginSetting("nvlink", False), PluginSetting("rdma", False),
                                   PluginSetting("topology", False)], registry())
    assert plugin_set.describe()["filters"] == ["gpu-filter", "card-health", "resource-filter", "node-pools",
                                                "replica-spread"]
    assert plugin_set.describe()["scorers"] == [{"name": "card-health", "weight": 1},
                                                {"name": "node-pools", "weight": 1}, {"name": "spread", "weight": 1},
                                                {"name": "model-locality", "weight": 1},
                                                {"name": "replica-spread", "weight": 2}]


def test_preempt_stage():
    stage = build_plugin_set([PluginSetting("preempt", True, 0, {"preempt_stage": "scheduled"})], registry())
    assert stage.preempt_stage == "scheduled"
    assert build_plugin_set([PluginSetting("preempt", False)], registry()).preempt_stage == "disabled"


def test_validate_extra():
    validate_extra("preempt", {"preempt_stage": "scheduled"}, registry())
    with pytest.raises(SettingError, match="preempt_stage must be one of disabled|scheduled|running") as refused:
        validate_extra("preempt", {"preempt_stage": "always"}, registry())
    assert refused.value.key == "preempt_stage"
    with pytest.raises(SettingError, match="unknown preempt setting") as refused:
        validate_extra("preempt", {"stage": "running"}, registry())
    assert refused.value.key == "stage"
    with pytest.raises(SettingError, match="unknown spread setting"):
        validate_extra("spread", {"anything": 1}, registry())
    with pytest.raises(ValueError, match="JSON object"):
        validate_extra("spread", ["x"], registry())
    with pytest.raises(ValueError, match="unknown plugin"):
        validate_extra("nope", {}, registry())


def test_extra_plugin_by_dotted_path():
    with_example = default_registry(extra_plugins=[EXAMPLE])
    plugin_set = build_plugin_set([], with_example)
    assert "cool-cards" in plugin_set.describe()["filters"]
    assert {"name": "cool-cards", "weight": 2} in plugin_set.describe()["scorers"]
    with pytest.raises(ValueError, match="max_temperature"):
        validate_extra("cool-cards", {"max_temperature": "hot"}, with_example)


def test_extra_plugins_come_from_settings(settings):
    settings.HETEROFLOW_EXTRA_PLUGINS = [EXAMPLE]
    assert "cool-cards" in default_registry()


def test_bad_dotted_path_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot be imported"):
        default_registry(extra_plugins=["tests.example_plugins.cool_cards.missing"])
    with pytest.raises(ValueError, match="lacks the spec attribute"):
        default_registry(extra_plugins=["tests.example_plugins.cool_cards.CoolCards"])


def test_duplicate_names_are_rejected():
    spec = PluginSpec("x", lambda setting: None, kinds=frozenset({"score"}))
    reg = Registry()
    reg.register(spec)
    with pytest.raises(ValueError, match="registered twice"):
        reg.register(spec)
