import threading

import pytest
from django.db import connection

from heteroflow_site.errors import DomainError
from plugins_admin.models import PluginChange
from plugins_admin.selectors import scheduler_plugins
from plugins_admin.services import UnknownPlugin, plugin_set_enabled, plugin_update
from scheduling.models import PluginConfig

pytestmark = pytest.mark.django_db


def _state(name: str) -> tuple[bool, int, dict]:
    row = PluginConfig.objects.get(name=name)
    return row.enabled, row.weight, row.extra


def _all_rows() -> list[tuple]:
    return list(PluginConfig.objects.order_by("name").values_list("name", "enabled", "weight", "extra"))


def test_enabling_binpack_disables_spread_and_gives_binpack_weight_one(admin_user):
    plugin_set_enabled(name="binpack", enabled=True, actor=admin_user)

    assert _state("binpack") == (True, 1, {})
    assert _state("spread")[0] is False
    scorers = [scorer["name"] for scorer in scheduler_plugins()["scorers"]]
    assert "binpack" in scorers and "spread" not in scorers


def test_enabling_fgd_disables_spread_and_binpack_and_enabling_either_disables_fgd(admin_user):
    plugin_set_enabled(name="fgd", enabled=True, actor=admin_user)

    assert _state("fgd") == (True, 1, {"tie_break": "best-fit", "cpu_weight": 1, "gap_weight": 3, "gap_horizon": 50})   # the measured best (§15.9)
    assert _state("spread")[0] is False and _state("binpack")[0] is False
    assert [scorer["name"] for scorer in scheduler_plugins()["scorers"]].count("fgd") == 1

    plugin_set_enabled(name="binpack", enabled=True, actor=admin_user)
    assert _state("fgd")[0] is False and _state("binpack")[0] is True


def test_fgd_settings_are_checked(admin_user):
    with pytest.raises(DomainError):
        plugin_update(name="fgd", extra={"tie_break": "sideways"}, actor=admin_user)
    assert _state("fgd") == (False, 0, {"tie_break": "best-fit", "cpu_weight": 1, "gap_weight": 3, "gap_horizon": 50})
    plugin_update(name="fgd", extra={"tie_break": "none", "cpu_weight": 0.5}, actor=admin_user)
    assert _state("fgd") == (False, 0, {"tie_break": "none", "cpu_weight": 0.5})


def test_enabling_spread_disables_binpack(admin_user):
    plugin_set_enabled(name="binpack", enabled=True, actor=admin_user)

    plugin_set_enabled(name="spread", enabled=True, actor=admin_user)

    assert _state("spread")[0] is True
    assert _state("binpack")[0] is False


def test_enabling_a_scorer_keeps_a_weight_it_already_has(admin_user):
    PluginConfig.objects.filter(name="nvlink").update(enabled=False, weight=7)

    plugin_set_enabled(name="nvlink", enabled=True, actor=admin_user)

    assert _state("nvlink") == (True, 7, {})


def test_disabling_a_score_plugin_keeps_the_exclusive_partner_off(admin_user):
    plugin_set_enabled(name="spread", enabled=False, actor=admin_user)

    assert _state("spread")[0] is False
    assert _state("binpack")[0] is False


@pytest.mark.parametrize("name", ["resource-filter", "gpu-filter"])
def test_disabling_a_forced_filter_is_refused_and_changes_nothing(admin_user, name, django_capture_on_commit_callbacks):
    before = _all_rows()

    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(DomainError) as refusal:
        plugin_set_enabled(name=name, enabled=False, actor=admin_user)

    assert refusal.value.field == "enabled"
    assert "always on" in refusal.value.message
    assert _all_rows() == before
    assert not PluginChange.objects.exists()
    assert callbacks == []


def test_unknown_plugin_is_refused(admin_user):
    with pytest.raises(UnknownPlugin):
        plugin_set_enabled(name="no-such-plugin", enabled=True, actor=admin_user)
    with pytest.raises(UnknownPlugin):
        plugin_update(name="no-such-plugin", weight=3, actor=admin_user)
    assert not PluginConfig.objects.filter(name="no-such-plugin").exists()


def test_every_changed_row_gets_a_history_entry_with_before_after_and_actor(admin_user):
    plugin_set_enabled(name="binpack", enabled=True, actor=admin_user)

    changes = {change.plugin: change for change in PluginChange.objects.all()}
    assert set(changes) == {"binpack", "spread"}
    assert changes["binpack"].actor == admin_user
    assert changes["binpack"].before == {"enabled": False, "weight": 0, "extra": {}}
    assert changes["binpack"].after == {"enabled": True, "weight": 1, "extra": {}}
    assert changes["spread"].before == {"enabled": True, "weight": 1, "extra": {}}
    assert changes["spread"].after == {"enabled": False, "weight": 1, "extra": {}}
    assert changes["spread"].at is not None


def test_a_change_that_changes_nothing_writes_no_history_and_notifies_nobody(admin_user,
                                                                              django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        plugin_set_enabled(name="spread", enabled=True, actor=admin_user)
        plugin_update(name="nvlink", weight=1, actor=admin_user)

    assert not PluginChange.objects.exists()
    assert callbacks == []


@pytest.mark.parametrize("weight", [-1, 101, 2.5, True, "5"])
def test_weight_must_be_a_whole_number_from_0_to_100(admin_user, weight):
    with pytest.raises(DomainError) as refusal:
        plugin_update(name="topology", weight=weight, actor=admin_user)

    assert refusal.value.field == "weight"
    assert _state("topology") == (True, 1, {})


def test_weight_is_saved_and_used_by_the_scheduler(admin_user):
    plugin_update(name="topology", weight=100, actor=admin_user)

    assert _state("topology")[1] == 100
    assert {"name": "topology", "weight": 100} in scheduler_plugins()["scorers"]


def test_an_enabled_scorer_cannot_get_weight_zero_but_a_disabled_one_can(admin_user):
    with pytest.raises(DomainError) as refusal:
        plugin_update(name="spread", weight=0, actor=admin_user)
    assert refusal.value.field == "weight"
    assert _state("spread")[1] == 1

    PluginConfig.objects.filter(name="rdma").update(enabled=False, weight=4)
    plugin_update(name="rdma", weight=0, actor=admin_user)
    assert _state("rdma") == (False, 0, {})


def test_a_plugin_that_does_not_score_has_no_weight(admin_user):
    with pytest.raises(DomainError) as refusal:
        plugin_update(name="gpu-filter", weight=5, actor=admin_user)

    assert refusal.value.field == "weight"
    assert _state("gpu-filter") == (True, 1, {})


def test_preempt_stage_is_saved_and_reaches_the_scheduler(admin_user):
    plugin_update(name="preempt", extra={"preempt_stage": "scheduled"}, actor=admin_user)

    assert _state("preempt")[2] == {"preempt_stage": "scheduled"}
    assert scheduler_plugins()["preempt_stage"] == "scheduled"
    change = PluginChange.objects.get()
    assert change.before["extra"] == {"preempt_stage": "running"}
    assert change.after["extra"] == {"preempt_stage": "scheduled"}


@pytest.mark.parametrize("extra,field", [({"preempt_stage": "always"}, "extra.preempt_stage"),
                                         ({"preempt_stage": "running", "speed": 3}, "extra.speed"),
                                         (["running"], "extra")])
def test_bad_extra_is_refused_naming_the_setting_and_changes_nothing(admin_user, extra, field):
    with pytest.raises(DomainError) as refusal:
        plugin_update(name="preempt", weight=None, extra=extra, actor=admin_user)

    assert (refusal.value.field, refusal.value.status) == (field, 400)
    assert _state("preempt")[2] == {"preempt_stage": "running"}
    assert not PluginChange.objects.exists()


def test_a_refused_weight_also_drops_the_extra_sent_with_it(admin_user):
    with pytest.raises(DomainError):
        plugin_update(name="preempt", weight=3, extra={"preempt_stage": "disabled"}, actor=admin_user)

    assert _state("preempt")[2] == {"preempt_stage": "running"}


def test_a_plugin_without_a_row_is_created_from_its_defaults_then_changed(admin_user):
    PluginConfig.objects.filter(name="binpack").delete()

    plugin_update(name="binpack", weight=9, actor=admin_user)

    assert _state("binpack") == (False, 9, {})
    assert PluginChange.objects.get().before == {"enabled": False, "weight": 0, "extra": {}}


@pytest.mark.django_db(transaction=True)
def test_concurrent_enables_of_spread_and_binpack_leave_exactly_one_on(admin_user):
    # Two admins flip the rivals on at the same time, again and again: the row locks serialise each pair of
    # writes, so no interleaving may leave both on (or deadlock).
    errors: list[Exception] = []
    start = threading.Barrier(2)

    def enable_repeatedly(name: str) -> None:
        try:
            start.wait()
            for _ in range(20):
                plugin_set_enabled(name=name, enabled=True, actor=admin_user)
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=enable_repeatedly, args=(name,)) for name in ("spread", "binpack")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    on = set(PluginConfig.objects.filter(name__in=["spread", "binpack"], enabled=True).values_list("name", flat=True))
    assert len(on) == 1
    assert [scorer["name"] for scorer in scheduler_plugins()["scorers"] if scorer["name"] in ("spread", "binpack")] \
        == list(on)
