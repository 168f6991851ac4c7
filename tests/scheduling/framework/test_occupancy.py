"""The one occupancy module: assume/forget a placement on a node, and the one rule of which cards a task holds."""

import pytest

from nodes.models import GPU
from scheduling.framework.occupancy import Occupant, assume, cards_held, forget
from scheduling.housekeeping.ledger_audit import ledger_audit
from scheduling.selectors import node_card_holders
from scheduling.cache.snapshot_builder import build_snapshot
from tests.factories import make_node, make_task
from tests.scheduling.framework.builders import make_node as make_node_info


def test_a_shard_holds_its_card_whatever_gpus_repeats_and_whole_cards_are_the_gpus():
    assert cards_held([0], {"card": 1, "memory_limit_mb": 1000}) == [1]
    assert cards_held([2, 3], None) == [2, 3]
    assert cards_held(None, {}) == []


def test_forget_undoes_assume_and_a_tenant_stays_on_a_card_its_other_placement_holds():
    node = make_node_info(cards=4)
    before = [(card.whole_card_tasks, card.shard_tasks, card.shard_memory_mb, set(card.occupant_tenants))
              for card in node.cards]
    whole = Occupant(7, "inference", (0, 1), ledger_gpus=2)
    shard = Occupant(7, "batch", (1,), shard_memory_mb=2048)

    assume(node, whole)
    assume(node, shard)
    assert (node.gpu_used, node.inference_tasks) == (2, 1)
    assert (node.cards[1].whole_card_tasks, node.cards[1].shard_tasks, node.cards[1].shard_memory_mb) == (1, 1, 2048)

    forget(node, whole, staying=[shard])
    assert node.cards[1].occupant_tenants == {7}  # the shard of tenant 7 is still on card 1
    assert node.cards[0].occupant_tenants == set()
    forget(node, shard)
    assert [(card.whole_card_tasks, card.shard_tasks, card.shard_memory_mb, set(card.occupant_tenants))
            for card in node.cards] == before
    assert (node.gpu_used, node.inference_tasks) == (0, 0)


@pytest.mark.django_db
def test_the_audit_the_snapshot_and_the_node_page_agree_on_the_cards_a_task_holds(tenant):
    node = make_node(cards=2)
    # A shard whose row also names another card in gpus: the shard's card is the one it holds, everywhere.
    task = make_task(tenant=tenant, status="running", node=node, gpus=[0], gpu_memory_mb=1000,
                     shard={"card": 1, "memory_limit_mb": 1000, "compute_percent": 10})
    GPU.objects.filter(node=node, index=0).update(memory_used_mb=500)

    audit = next(entry for entry in ledger_audit().nodes if entry.node_id == node.id)
    snapshot_node = build_snapshot().node(node.id)
    holders = node_card_holders(node=node)

    assert audit.busy_without_task == (0,)
    assert [(card.index, card.shard_tasks) for card in snapshot_node.cards] == [(0, 0), (1, 1)]
    assert [(index, [entry["id"] for entry in entries]) for (_, index), entries in holders.items()] == [(1, [task.id])]
