from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.lifecycle import IllegalTransition
from scheduling.housekeeping.loops import enforce_task_timeouts
from scheduling.models import Task
from scheduling.services.agent_reports import AgentArcRefused, NotThisNodesTask, agent_report_status
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task


class TestAgentReport:
    def _running_task(self, tenant, node, **fields):
        task = make_task(tenant=tenant, gpu_required=1, **fields)
        assert task_transition(task.id, "pending", "scheduled", node=node, gpus=[0])
        return task

    def test_claim_and_finish(self, db, tenant):
        node = make_node()
        task = self._running_task(tenant, node)
        assert agent_report_status(node=node, task_id=task.id, from_status="scheduled", to_status="running")
        assert agent_report_status(node=node, task_id=task.id, from_status="running", to_status="succeeded")
        node.refresh_from_db()
        assert node.gpu_used == 0

    def test_stale_report_loses(self, db, tenant):
        node = make_node()
        task = self._running_task(tenant, node)
        assert not agent_report_status(node=node, task_id=task.id, from_status="running", to_status="succeeded")
        assert Task.objects.get(id=task.id).status == "scheduled"

    def test_illegal_pair_names_both_states(self, db, tenant):
        node = make_node()
        task = self._running_task(tenant, node)
        with pytest.raises(IllegalTransition, match="preempting → stopped"):
            agent_report_status(node=node, task_id=task.id, from_status="preempting", to_status="stopped")

    def test_control_plane_arcs_are_refused(self, db, tenant):
        node = make_node()
        task = self._running_task(tenant, node)
        with pytest.raises(AgentArcRefused):
            agent_report_status(node=node, task_id=task.id, from_status="scheduled", to_status="pending")
        assert Task.objects.get(id=task.id).status == "scheduled"

    def test_another_nodes_task_is_not_found(self, db, tenant):
        node, other = make_node(), make_node()
        task = self._running_task(tenant, node)
        with pytest.raises(NotThisNodesTask):
            agent_report_status(node=other, task_id=task.id, from_status="scheduled", to_status="running")
        with pytest.raises(NotThisNodesTask):
            agent_report_status(node=other, task_id=999999, from_status="scheduled", to_status="running")
        assert Task.objects.get(id=task.id).status == "scheduled"

    def test_preemption_settles_once(self, db, tenant):
        node = make_node()
        task = self._running_task(tenant, node, preemptible=True)
        assert task_transition(task.id, "scheduled", "running")
        assert task_transition(task.id, "running", "preempting")
        assert agent_report_status(node=node, task_id=task.id, from_status="preempting", to_status="pending")
        task.refresh_from_db()
        node.refresh_from_db()
        assert (task.status, task.node_id, task.preempt_count, task.preemptible) == ("pending", None, 1, False)
        assert node.gpu_used == 0
        assert not agent_report_status(node=node, task_id=task.id, from_status="preempting", to_status="pending")
        task.refresh_from_db()
        assert task.preempt_count == 1


class TestTimeoutStops:
    def test_a_confirmed_stop_of_a_timed_out_task_ends_failed_with_timeout(self, db, tenant):
        node = make_node(cards=2)
        task = make_task(tenant=tenant, gpu_required=1)
        task_transition(task.id, "pending", "scheduled", node=node, gpus=[0])
        task_transition(task.id, "scheduled", "running")
        Task.objects.filter(id=task.id).update(started_at=timezone.now() - timedelta(hours=3))
        assert enforce_task_timeouts() == 1

        assert agent_report_status(node=node, task_id=task.id, from_status="stopping", to_status="stopped")

        task.refresh_from_db()
        node.refresh_from_db()
        assert (task.status, task.reason, node.gpu_used) == ("failed", "Timeout", 0)
