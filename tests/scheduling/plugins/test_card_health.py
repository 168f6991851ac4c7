"""card-health: a quarantined card takes nothing and is named `CardUnhealthy` in the summary line; degraded cards
lower their node's score (design §17.3)."""

import random

import pytest
from django.utils import timezone

from nodes.models import GPU
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from scheduling.framework.cards import ChosenCards
from scheduling.framework.framework import Framework
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.models import Task
from scheduling.plugins import build_plugin_set, default_registry
from scheduling.plugins.card_health import CARD_UNHEALTHY, NAME, hold_quarantined_cards
from tests import factories
from tests.scheduling.bind.single import bind_task
from tests.scheduling.framework.builders import make_node, make_snapshot, make_task


def framework() -> Framework:
    return Framework(build_plugin_set([]), SchedulerConfig())


def quarantined_node(cards: int, *quarantined: int, **fields):
    node = make_node(cards=cards, **fields)
    for index in quarantined:
        node.cards[index].quarantined = True
        node.cards[index].health = "failed"
    hold_quarantined_cards(node)
    return node


def schedule(task, *nodes):
    return framework().schedule(task, make_snapshot(*nodes), random.Random(1))


def test_it_is_always_on():
    spec = default_registry()[NAME]
    assert spec.always_on
    assert build_plugin_set([]).filters and NAME in [plugin.name for plugin in build_plugin_set([]).filters]


def test_a_node_whose_free_room_is_quarantined_is_counted_as_card_unhealthy_in_the_summary():
    result = schedule(make_task(gpu_type="nvidia", gpu_required=2), quarantined_node(2, 1))
    assert result.node is None
    assert result.message == f"0/1 nodes are available: 1 {CARD_UNHEALTHY}."


def test_a_quarantined_card_is_never_chosen():
    node = quarantined_node(2, 0)
    result = schedule(make_task(gpu_type="nvidia", gpu_required=1), node)
    assert result.node is node
    assert list(framework().reserve(make_task(gpu_type="nvidia", gpu_required=1), node)) == [1]


def test_a_shard_does_not_land_on_a_quarantined_card():
    result = schedule(make_task(gpu_type="nvidia", gpu_memory_mb=1000), quarantined_node(1, 0))
    assert result.node is None and CARD_UNHEALTHY in result.message


def test_without_the_quarantine_the_reason_is_the_usual_one():
    busy = make_node(cards=2)
    busy.gpu_used = 2
    result = schedule(make_task(gpu_type="nvidia", gpu_required=2), busy)
    assert CARD_UNHEALTHY not in result.message


def test_degraded_cards_lower_their_nodes_score():
    healthy, degraded = make_node(cards=4, name="healthy"), make_node(cards=4, name="worn")
    degraded.cards[0].health = "degraded"
    for seed in range(5):
        result = framework().schedule(make_task(gpu_type="nvidia", gpu_required=1), make_snapshot(degraded, healthy),
                                      random.Random(seed))
        assert result.node is healthy
        assert (result.scores[degraded.id][NAME], result.scores[healthy.id][NAME]) == (-25.0, 0.0)


@pytest.mark.django_db
def test_the_snapshot_holds_quarantined_cards_from_the_database():
    node = factories.make_node(cards=2)
    GPU.objects.filter(node=node, index=1).update(quarantined_at=timezone.now(), health="failed")
    built = build_snapshot().node(node.id)
    assert [(card.index, card.quarantined, card.is_free) for card in built.cards] == [(0, False, True),
                                                                                      (1, True, False)]
    assert built.gpu_used == 0


@pytest.mark.django_db
def test_a_bind_chosen_on_a_stale_snapshot_does_not_take_a_card_quarantined_meanwhile(tenant):
    node = factories.make_node(cards=2)
    snapshot = build_snapshot()
    row = Task.objects.filter(id=factories.make_task(tenant=tenant, gpu_type="nvidia", gpu_required=1).id)
    task = task_info_from_row(row.values_list(*TASK_INFO_FIELDS).get())
    GPU.objects.filter(node=node, index=0).update(quarantined_at=timezone.now(), health="failed")

    outcome = bind_task(task, snapshot.node(node.id), ChosenCards([0], "nvidia"), config=SchedulerConfig(),
                        reserve=framework().reserve)

    assert outcome.bound and outcome.cards == (1,)


@pytest.mark.django_db(transaction=True)
def test_a_card_quarantined_between_cycles_is_seen_through_the_kept_table(tenant):
    """The snapshot cache keeps its table across cycles: the plugin's per-row figures must follow the rows the
    cache refreshes, not only those of the current cycle."""
    import numpy as np

    from scheduling.cache.snapshot_cache import SnapshotCache
    from scheduling.plugins.card_health import CardHealthPlugin

    node = factories.make_node(cards=1)
    cache = SnapshotCache()
    plugin = CardHealthPlugin()
    task = make_task(gpu_type="nvidia", gpu_required=1)
    with cache.snapshot(SchedulerConfig()) as snapshot:
        table = snapshot.table
        rows = np.arange(table.size)
        assert plugin.filter_rows(None, task, table, rows).tolist() == [0]
    GPU.objects.filter(node=node).update(quarantined_at=timezone.now(), health="failed")
    with cache.snapshot(SchedulerConfig()) as snapshot:
        assert snapshot.table is table
        assert plugin.filter_rows(None, task, table, rows).tolist() == [1]
