"""One NodeInfo builder (`scheduling.cache.node_info`): the snapshot (ORM rows) and bind's live read (raw SQL under
the row locks) see a node the same way — the same cards in the same order, the same occupants."""

import pytest
from django.db import transaction

from nodes.models import GPU
from scheduling.bind.live import lock_and_read
from scheduling.cache.snapshot_builder import read_nodes
from tests.factories import make_node
from tests.scheduling.preemption.conftest import placed_task

pytestmark = pytest.mark.django_db


def _seen(node):
    return [(card.type, card.index, card.whole_card_tasks, tuple(sorted(card.occupant_tenants)))
            for card in node.cards], node.cards_visible_to_every_container


def test_the_snapshot_and_binds_live_read_build_the_same_node(tenant):
    node = make_node(gpu_type="nvidia", cards=2)
    # A second vendor's cards whose indexes interleave with the first's.
    GPU.objects.bulk_create(GPU(node=node, index=index, uuid=f"hygon-{index}", type="hygon", model="K100",
                                memory_total_mb=65536) for index in (0, 1))
    placed_task(tenant=tenant, node=node, gpus=[1], preemptible=False, card_type="hygon")

    [snapshot_node] = read_nodes(node_ids=[node.id])
    with transaction.atomic():
        live_node = lock_and_read([node.id], [tenant.id]).nodes[node.id].node_info()

    assert _seen(snapshot_node) == _seen(live_node)
    assert [(card.type, card.index) for card in live_node.cards] == [
        ("hygon", 0), ("hygon", 1), ("nvidia", 0), ("nvidia", 1)]
