"""An agent's exit report is never dropped for a long reason (issue 27 item 6): accepted, its reason shortened."""

import pytest

from scheduling import lifecycle
from scheduling.models import TaskEvent
from tests.scheduling.preemption.conftest import placed_task
from tests.nodes.conftest import agent, registered  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def test_a_failure_report_with_a_reason_over_300_characters_is_taken_and_shortened(agent, registered, tenant):  # noqa: F811
    node, _ = registered
    task = placed_task(tenant=tenant, node=node, gpus=[0])
    error = "exit code 1: " + "E" * 2000

    response = agent.post(f"/api/v1/agent/tasks/{task.id}/status", {"from": "running", "to": "failed",
                                                                    "reason": error}, format="json")

    assert response.status_code == 200
    task.refresh_from_db()
    assert task.status == lifecycle.FAILED
    assert task.reason == error[:299] + "…"
    assert TaskEvent.objects.filter(task=task).latest("id").reason == task.reason
