import logging

from nodes.models import Node
from nodes.services import node_heartbeat_apply
from scheduling.housekeeping.node_ledger import node_gpu_used_recount
from tests.factories import make_node, make_task
from tests.nodes.conftest import card


class TestRecount:
    def test_matching_ledgers_change_nothing(self, db, tenant):
        node = make_node()
        make_task(tenant=tenant, node=node, status="running", gpu_required=2)
        Node.objects.filter(id=node.id).update(gpu_used=2)
        assert node_gpu_used_recount(node_id=node.id) is None

    def test_drift_is_corrected_and_logged_with_both_numbers(self, db, tenant, caplog):
        node = make_node()
        for status, gpus in [("running", 2), ("scheduled", 1), ("preempting", 1), ("stopping", 1),
                             ("pending", 4), ("succeeded", 3), ("failed", 2)]:
            make_task(tenant=tenant, node=node, status=status, gpu_required=gpus)
        Node.objects.filter(id=node.id).update(gpu_used=7)
        with caplog.at_level(logging.WARNING, logger="scheduling.housekeeping.node_ledger"):
            assert node_gpu_used_recount(node_id=node.id) == 5
        node.refresh_from_db()
        assert node.gpu_used == 5
        assert "stored 7, recounted 5" in caplog.text

    def test_heartbeat_runs_the_recount(self, db, tenant):
        node = make_node(cards=2)
        make_task(tenant=tenant, node=node, status="running", gpu_required=1)
        Node.objects.filter(id=node.id).update(gpu_used=0)
        node_heartbeat_apply(node=node, cpu_percent=10.0, memory_used_mb=1024, gpus=[card(0), card(1)], labels={})
        assert node.gpu_used == 1
