from datetime import timedelta

import pytest
from django.utils import timezone

from heteroflow_site.errors import DomainError
from nodes.agent.topology import TOPOLOGY_LABEL
from nodes.models import GPU, Node, NodeAuditEntry
from nodes.services import (
    agent_register,
    node_for_token,
    node_heartbeat_apply,
    node_token_hash,
    node_topology_update,
    node_update,
    nodes_mark_silent_offline,
)
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task
from tests.nodes.conftest import NV4_LABEL, card


def _heartbeat(node, gpus, labels=None, **fields):
    return node_heartbeat_apply(node=node, cpu_percent=fields.get("cpu_percent", 10.0),
                                memory_used_mb=fields.get("memory_used_mb", 1024), gpus=gpus, labels=labels or {})


class TestRegister:
    def test_stores_only_the_hash_of_the_token(self, db):
        node, token = agent_register(name="n1", internal_ip="10.0.0.1/24", public_ip=None, cpu_cores=8, memory_gb=32)
        assert token not in node.agent_token_hash
        assert node.agent_token_hash == node_token_hash(token)
        assert node_for_token(token) == node

    def test_re_registering_returns_the_node_with_a_new_token_and_revokes_the_old(self, db):
        first, old_token = agent_register(name="n1", internal_ip="10.0.0.1/24", public_ip=None, cpu_cores=8,
                                          memory_gb=32)
        again, new_token = agent_register(name="n1", internal_ip="10.0.0.2/24", public_ip=None, cpu_cores=16,
                                          memory_gb=64, by_admin=True)
        assert again.id == first.id and new_token != old_token
        assert node_for_token(old_token) is None
        assert node_for_token(new_token) == again
        assert (again.internal_ip, again.cpu_cores) == ("10.0.0.2/24", 16)


class TestHeartbeat:
    def test_records_figures_cards_and_comes_online(self, db):
        node = make_node(cards=0, status="offline")
        _heartbeat(node, [card(i) for i in range(4)], cpu_percent=33.0, memory_used_mb=4096)
        node.refresh_from_db()
        assert (node.status, node.cpu_percent, node.memory_used_mb) == ("online", 33.0, 4096)
        assert (node.gpu_total, node.gpu_type) == (4, "nvidia")
        assert node.last_heartbeat_at is not None
        assert list(node.gpus.values_list("index", "numa")) == [(0, 0), (1, 0), (2, 1), (3, 1)]

    def test_diffs_cards_by_index(self, db):
        node = make_node(cards=3)
        kept_row = GPU.objects.get(node=node, index=0)
        _heartbeat(node, [card(0, uuid=kept_row.uuid, model="A100", numa=None), card(1, memory_used_mb=500),
                          card(5)])
        rows = {gpu.index: gpu for gpu in node.gpus.all()}
        assert sorted(rows) == [0, 1, 5]
        assert rows[0].id == kept_row.id
        assert rows[1].memory_used_mb == 500
        assert node.gpu_total == 3

    def test_gpu_type_is_the_majority_of_the_cards(self, db):
        node = make_node(cards=0)
        _heartbeat(node, [card(0, type="ascend"), card(1, type="ascend"), card(2, type="nvidia")])
        assert node.gpu_type == "ascend"
        _heartbeat(node, [])
        assert (node.gpu_type, node.gpu_total) == ("", 0)

    def test_a_tie_goes_to_the_type_detected_first(self, db):
        node = make_node(cards=0)
        _heartbeat(node, [card(0, type="nvidia"), card(1, type="musa")])
        assert node.gpu_type == "musa"

    def test_a_node_with_every_card_held_reports_busy_and_online_again_once_one_frees(self, db, tenant):
        node = make_node(cards=1)
        task = make_task(tenant=tenant, gpu_required=1)
        task_transition(task.id, "pending", "scheduled", node=node, gpus=[0])
        _heartbeat(node, [card(0)])
        assert node.status == "busy"

        task_transition(task.id, "scheduled", "stopping")
        task_transition(task.id, "stopping", "stopped")
        _heartbeat(node, [card(0)])
        assert node.status == "online"

    def test_agent_labels_are_replaced_admin_labels_untouched(self, db):
        node = make_node(labels={"rdma": "true", "heteroflow.io/gpu-type": "nvidia", TOPOLOGY_LABEL: "nv=;numa=0:-"})
        _heartbeat(node, [card(0)], labels={TOPOLOGY_LABEL: NV4_LABEL})
        assert node.labels == {"rdma": "true", TOPOLOGY_LABEL: NV4_LABEL}
        _heartbeat(node, [card(0)], labels={})
        assert node.labels == {"rdma": "true"}

    def test_labels_the_agent_discovers_fill_gaps_but_never_overwrite_admin_values(self, db):
        node = make_node(labels={"rdma": "false"})
        _heartbeat(node, [card(0)], labels={"rdma": "true", "rdma-speed": "200"})
        assert node.labels == {"rdma": "false", "rdma-speed": "200"}


class TestLiveness:
    def test_silent_nodes_go_offline_and_a_heartbeat_brings_them_back(self, db):
        now = timezone.now()
        silent = make_node(cards=1, last_heartbeat_at=now - timedelta(seconds=31))
        busy_silent = make_node(cards=1, status="busy", last_heartbeat_at=now - timedelta(seconds=45))
        fresh = make_node(cards=1, last_heartbeat_at=now - timedelta(seconds=29))
        assert nodes_mark_silent_offline(now=now) == 2
        statuses = dict(Node.objects.values_list("id", "status"))
        assert statuses == {silent.id: "offline", busy_silent.id: "offline", fresh.id: "online"}
        _heartbeat(silent, [card(0)])
        assert silent.status == "online"

    def test_after_the_database_was_unreachable_nodes_get_a_full_timeout_to_report(self, db):
        node = make_node(last_heartbeat_at=timezone.now())
        start = timezone.now()
        assert nodes_mark_silent_offline(now=start) == 0
        # No run reached the database for two minutes: no heartbeat could land either.
        back = start + timedelta(minutes=2)
        assert nodes_mark_silent_offline(now=back) == 0
        assert nodes_mark_silent_offline(now=back + timedelta(seconds=20)) == 0
        node.refresh_from_db()
        assert node.status == "online"
        for seconds in (30, 35):
            nodes_mark_silent_offline(now=back + timedelta(seconds=seconds))
        node.refresh_from_db()
        assert node.status == "offline", "still silent a full timeout after the database came back"

    def test_a_node_that_never_reported_counts_from_its_creation(self, db):
        never = make_node(cards=0)
        start = timezone.now()
        assert nodes_mark_silent_offline(now=start) == 0
        assert nodes_mark_silent_offline(now=start + timedelta(seconds=15)) == 0
        assert nodes_mark_silent_offline(now=start + timedelta(seconds=31)) == 1
        never.refresh_from_db()
        assert never.status == "offline"


class TestAdminEdits:
    def test_topology_update_is_audited(self, db, admin_user):
        node = make_node(region="eu")
        node_topology_update(node=node, region="eu", zone="eu-1a", rack="r7", actor=admin_user)
        assert (node.region, node.zone, node.rack) == ("eu", "eu-1a", "r7")
        entry = NodeAuditEntry.objects.get(node=node)
        assert (entry.actor, entry.action) == (admin_user, "node.topology")
        assert entry.before == {"zone": "", "rack": ""} and entry.after == {"zone": "eu-1a", "rack": "r7"}

    def test_update_keeps_agent_labels_and_unmentioned_fields(self, db, admin_user, tenant):
        node = make_node(labels={TOPOLOGY_LABEL: NV4_LABEL, "old": "x"}, dedicated_tenant=tenant)
        node_update(node=node, labels={"rdma": "true"}, actor=admin_user)
        assert node.labels == {"rdma": "true", TOPOLOGY_LABEL: NV4_LABEL}
        assert node.dedicated_tenant_id == tenant.id and node.schedulable
        node_update(node=node, schedulable=False, dedicated_tenant=None, actor=admin_user)
        assert (node.schedulable, node.dedicated_tenant_id) == (False, None)
        assert NodeAuditEntry.objects.filter(node=node).count() == 2

    def test_admins_cannot_set_agent_labels(self, db, admin_user):
        node = make_node(labels={})
        with pytest.raises(DomainError) as refused:
            node_update(node=node, labels={TOPOLOGY_LABEL: NV4_LABEL}, actor=admin_user)
        assert refused.value.field == "labels"
        node.refresh_from_db()
        assert node.labels == {} and not NodeAuditEntry.objects.exists()

    def test_no_change_writes_no_audit_row(self, db, admin_user):
        node = make_node()
        node_update(node=node, schedulable=True, actor=admin_user)
        assert not NodeAuditEntry.objects.exists()
