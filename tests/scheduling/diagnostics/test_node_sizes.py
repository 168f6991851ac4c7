"""The submit warnings' node sizes: kept by the process, re-read only for the nodes the change log names.

Transactional tests: the change log tells committed transactions apart, and inside a transaction the sizes are
read afresh and not kept.
"""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from nodes.models import Node
from nodes.services import node_heartbeat_apply
from scheduling.diagnostics.node_sizes import FULL_READ_SECONDS, NodeSizes, read_sizes
from scheduling.diagnostics.submission_warnings import submission_warnings
from scheduling.framework.never_fits import never_fits_message
from tests.factories import make_node
from tests.nodes.conftest import card

pytestmark = pytest.mark.django_db(transaction=True)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _message(sizes: NodeSizes, *, gpus: int, tenant_id: int = 1) -> str | None:
    return never_fits_message(tenant_id=tenant_id, gpu_type="nvidia", gpu_required=gpus, gpu_memory_mb=0,
                              cpu_cores=1, memory_mb=0, nodes=sizes.stand_ins())


def test_with_nothing_changed_a_look_is_one_statement_and_sizes_are_what_a_fresh_read_gives():
    """issue 47 item 4: every submit read every node and aggregated every card (43 % of a submit's CPU at 300
    nodes)."""
    for index in range(6):
        make_node(cards=8 if index % 2 else 4, cpu_cores=64 + index % 3)
    sizes = NodeSizes(clock=_Clock())
    first = sizes.stand_ins()

    with CaptureQueriesContext(connection) as statements:
        again = sizes.stand_ins()

    assert len(statements.captured_queries) == 1, [query["sql"] for query in statements.captured_queries]
    assert "pg_current_snapshot" in statements.captured_queries[0]["sql"]
    assert again == first
    distinct = set(read_sizes().values())
    assert len(first) == len(distinct) == 6 and {node.gpu_total for node in first} == {4, 8}


def test_a_node_whose_cards_change_is_read_again_and_the_warning_follows():
    node = make_node(cards=4)
    sizes = NodeSizes(clock=_Clock())
    assert "8 GPUs (at most 4 on one node)" in _message(sizes, gpus=8)

    node_heartbeat_apply(node=node, cpu_percent=1.0, memory_used_mb=0, gpus=[card(i) for i in range(8)], labels={})

    assert _message(sizes, gpus=8) is None
    assert sizes.full_reads == 1, "the node was read again, not the cluster"


def test_nodes_that_join_leave_or_are_dedicated_are_seen():
    kept = make_node(cards=8)
    sizes = NodeSizes(clock=_Clock())
    assert _message(sizes, gpus=16) is not None

    joined = make_node(cards=16)
    assert _message(sizes, gpus=16) is None
    Node.objects.filter(id=joined.id).update(dedicated_tenant_id=_other_tenant_id())
    assert _message(sizes, gpus=16) is not None, "dedicated to another tenant: not a candidate for tenant 1"
    Node.objects.filter(id=joined.id).delete()
    Node.objects.filter(id=kept.id).update(gpu_total=4)
    assert "at most 4 on one node" in _message(sizes, gpus=16)
    assert sizes.full_reads == 1


def test_the_whole_cluster_is_read_again_after_full_read_seconds():
    make_node(cards=8)
    clock = _Clock()
    sizes = NodeSizes(clock=clock)
    sizes.stand_ins()
    clock.now += FULL_READ_SECONDS
    sizes.stand_ins()
    assert sizes.full_reads == 2


def test_inside_a_transaction_sizes_are_read_afresh_and_not_kept():
    sizes = NodeSizes(clock=_Clock())
    with transaction.atomic():
        make_node(cards=32)
        assert _message(sizes, gpus=32) is None
        transaction.set_rollback(True)
    make_node(cards=8)
    assert "at most 8 on one node" in _message(sizes, gpus=32), "the rolled-back node is not kept"


def test_the_submit_warning_reads_the_kept_sizes():
    make_node(cards=8)
    [warning] = submission_warnings(tenant_id=1, gpu_type="nvidia", gpu_required=64, gpu_memory_mb=0, cpu_cores=1,
                                    memory_mb=0)
    assert "64 GPUs (at most 8 on one node)" in warning["message"]
    with CaptureQueriesContext(connection) as statements:
        submission_warnings(tenant_id=1, gpu_type="nvidia", gpu_required=64, gpu_memory_mb=0, cpu_cores=1,
                            memory_mb=0)
    assert len(statements.captured_queries) == 1


def _other_tenant_id() -> int:
    from tenants.models import Tenant

    return Tenant.objects.create(name="other").id
