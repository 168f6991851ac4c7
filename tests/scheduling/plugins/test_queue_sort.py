"""The weighted queue order of seed 002 (design §16.3): the worked example of docs/scheduling.md, term by term."""

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.framework.registry import PluginSetting, validate_extra
from scheduling.plugins import build_plugin_set, default_registry
from scheduling.plugins.queue_sort import Cards, EntryFacts, terms, weighted_score
from scheduling.selectors import current_plugin_settings

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
CARDS = {"nvidia": Cards(allocated=8, total=16), "": Cards(allocated=8, total=16)}


def at(hours: int, minutes: int) -> datetime:
    return NOW.replace(hour=hours, minute=minutes)


# docs/scheduling.md, "Queue order": four pending entries at 12:00 on 16 nvidia cards, 8 of them allocated.
EXAMPLE = {
    "A": EntryFacts(priority=50, created_at=at(11, 50), deadline=at(12, 10), gpu_type="nvidia", cards=2),
    "B": EntryFacts(priority=90, created_at=at(11, 0), deadline=None, gpu_type="nvidia", cards=1),
    "C": EntryFacts(priority=50, created_at=at(11, 58), deadline=None, gpu_type="nvidia", cards=8),
    "D": EntryFacts(priority=70, created_at=at(11, 30), deadline=at(14, 30), gpu_type="nvidia", cards=12),
}


def test_the_worked_example_term_by_term():
    expected = {
        "A": {"sla": 0.5, "utilisation": 0.625, "priority": 0.5, "waiting": 1 / 6},
        "B": {"sla": 0.0, "utilisation": 0.5625, "priority": 0.9, "waiting": 1.0},
        "C": {"sla": 0.0, "utilisation": 1.0, "priority": 0.5, "waiting": 1 / 30},
        # 12 cards do not fit the 8 free ones: it adds nothing to the utilisation now.
        "D": {"sla": 1 / 6, "utilisation": 0.5, "priority": 0.7, "waiting": 0.5},
    }
    for name, facts in EXAMPLE.items():
        assert terms(facts, now=NOW, cards=CARDS) == pytest.approx(expected[name]), name
    scores = {name: round(weighted_score(facts, now=NOW, cards=CARDS), 4) for name, facts in EXAMPLE.items()}
    assert scores == {"A": 0.5042, "B": 0.4487, "C": 0.4033, "D": 0.4067}
    assert sorted(EXAMPLE, key=lambda name: -scores[name]) == ["A", "B", "D", "C"]


def test_a_passed_deadline_counts_fully_and_a_wait_of_an_hour_too():
    late = EntryFacts(priority=0, created_at=NOW - timedelta(hours=3), deadline=NOW - timedelta(minutes=1),
                      gpu_type="", cards=0)
    assert terms(late, now=NOW, cards=CARDS)["sla"] == 1.0
    assert terms(late, now=NOW, cards=CARDS)["waiting"] == 1.0


def test_a_deadline_a_second_away_does_not_outweigh_the_priority_term():
    """The SLA term of a deadline closer than ten minutes grows as a ten-minute deadline's does."""
    low_with_deadline = EntryFacts(priority=0, created_at=NOW - timedelta(seconds=5),
                                   deadline=NOW - timedelta(seconds=4), gpu_type="", cards=0)
    high = EntryFacts(priority=100, created_at=NOW - timedelta(seconds=5), deadline=None, gpu_type="", cards=0)
    assert terms(low_with_deadline, now=NOW, cards=CARDS)["sla"] == pytest.approx(5 / 600)
    assert weighted_score(high, now=NOW, cards=CARDS) > weighted_score(low_with_deadline, now=NOW, cards=CARDS)
    # A deadline in the past when submitted counts no faster either; it counts fully ten minutes on.
    backdated = EntryFacts(priority=0, created_at=NOW - timedelta(minutes=10), deadline=NOW - timedelta(days=1),
                           gpu_type="", cards=0)
    assert terms(backdated, now=NOW, cards=CARDS)["sla"] == 1.0


def test_the_setting_reaches_the_plugin_set_and_is_validated():
    registry = default_registry(extra_plugins=())
    assert build_plugin_set([], registry).queue_order == "priority"
    weighted = PluginSetting("queue-sort", True, 0, {"order": "weighted"})
    assert build_plugin_set([weighted], registry).queue_order == "weighted"
    # Always on: a stored "off" still orders the queue (by its setting).
    assert build_plugin_set([PluginSetting("queue-sort", False, 0, {"order": "weighted"})],
                            registry).queue_order == "weighted"
    for bad in ({"order": "random"}, {"order": 1}, {"weights": {}}):
        with pytest.raises(ValueError):
            validate_extra("queue-sort", bad, registry)


@pytest.mark.django_db
def test_fair_share_is_an_order_an_admin_may_choose_and_priority_stays_the_default(admin_client):
    listed = {plugin["name"]: plugin for plugin in admin_client.get("/api/v1/plugins").json()}
    assert listed["queue-sort"]["extra"] == {"order": "priority"}

    response = admin_client.put("/api/v1/plugins/queue-sort", {"extra": {"order": "fair-share"}}, format="json")

    assert response.status_code == 200 and response.json()["extra"] == {"order": "fair-share"}
    assert build_plugin_set(current_plugin_settings(), default_registry(extra_plugins=())).queue_order == "fair-share"
