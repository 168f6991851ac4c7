"""design §16.5: on Hygon, MetaX and Biren every container sees every card, so a node holds one tenant's
card-holding tasks at a time (issue 27 item 8): the built-in SingleTenantRuntime filter over the snapshot's table,
kept current by in-memory binds."""

import random

import pytest

from scheduling.framework.framework import Framework
from scheduling.framework.occupancy import apply_bind
from scheduling.framework.registry import build_plugin_set
from scheduling.plugins import default_registry
from scheduling.plugins.single_tenant_runtime import SINGLE_TENANT_RUNTIME
from tests.scheduling.framework.builders import CONFIG, make_node, make_snapshot, make_task, occupy

TENANT, OTHER = 1, 2


def _framework():
    return Framework(build_plugin_set([], default_registry()), CONFIG)


@pytest.mark.parametrize("gpu_type", ["hygon", "metax", "biren"])
def test_a_node_whose_containers_see_every_card_refuses_another_tenants_task(gpu_type):
    node = make_node(gpu_type=gpu_type, model="card")
    occupy(node.cards[0], OTHER)
    result = _framework().schedule(make_task(tenant_id=TENANT, gpu_required=1), make_snapshot(node), random.Random(0))
    assert result.node is None
    assert result.reason_counts() == {SINGLE_TENANT_RUNTIME: 1}
    assert SINGLE_TENANT_RUNTIME in result.message


def test_the_holding_tenant_a_task_without_cards_and_other_vendors_are_not_refused():
    hygon, nvidia = make_node(gpu_type="hygon", model="K100"), make_node(gpu_type="nvidia")
    occupy(hygon.cards[0], TENANT)
    occupy(nvidia.cards[0], OTHER)
    snapshot = make_snapshot(hygon)
    assert _framework().schedule(make_task(tenant_id=TENANT, gpu_required=1), snapshot, random.Random(0)).node is hygon
    assert _framework().schedule(make_task(tenant_id=OTHER, cpu_cores=1), snapshot, random.Random(0)).node is hygon
    result = _framework().schedule(make_task(tenant_id=TENANT, gpu_required=1), make_snapshot(nvidia),
                                   random.Random(0))
    assert result.node is nvidia


def test_one_cycle_never_puts_two_tenants_on_one_such_node():
    """The first bind of the cycle makes the node its tenant's: the second tenant's task reads the reason."""
    node = make_node(gpu_type="metax", model="C500")
    snapshot, framework = make_snapshot(node), _framework()
    first = make_task(tenant_id=TENANT, gpu_required=1)
    placed = framework.schedule(first, snapshot, random.Random(0))
    apply_bind(snapshot, first, placed.node, framework.reserve(first, placed.node, snapshot.tenancy))
    second = framework.schedule(make_task(tenant_id=OTHER, gpu_memory_mb=1024), snapshot, random.Random(0))
    assert second.node is None
    assert second.reason_counts() == {SINGLE_TENANT_RUNTIME: 1}
