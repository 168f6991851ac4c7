"""A task's output from the simulated runtime to its tenant, through the real HTTP API of a live server
(design §16.4): shipped while it runs, complete once it ended, another tenant's 404."""

import time

import pytest
import requests

from tenants.models import Tenant
from tenants.services import tenant_user_create
from tests.nodes.test_agent_end_to_end import _run_until, _schedule, _submit, fleet  # noqa: F401  (fleet: fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_training_output_reaches_its_tenant_while_it_runs_and_nobody_else(live_server, fleet):
    node, agent, session = fleet
    agent.run_once()
    task_id = _submit(live_server, session, type="training", labels={"HETEROFLOW_SIM_SECONDS": "2"})
    _schedule(task_id, node)
    _run_until(agent, task_id, "running")
    logs_url = f"{live_server.url}/api/v1/tasks/{task_id}/logs"

    deadline = time.monotonic() + 10
    while "loss" not in (running := session.get(logs_url, timeout=10)).text:
        assert time.monotonic() < deadline, "no training progress shipped while the task ran"
        time.sleep(0.2)
        agent.run_once()
    assert "initializing process group" in running.text
    _run_until(agent, task_id, "succeeded")
    # On a loaded machine the first batch may already hold the end: what follows it may be empty.
    followed = session.get(logs_url, params={"offset": running.headers["X-Log-Offset"]}, timeout=10)
    whole = session.get(logs_url, timeout=10).text
    assert whole == running.text + followed.text and whole.endswith("finished\n")
    assert session.get(logs_url, params={"tail": 1}, timeout=10).text == "finished\n"

    _, stranger_token = tenant_user_create(tenant=Tenant.objects.create(name="globex"), username="stranger",
                                           password="stranger-password")
    refused = requests.get(logs_url, headers={"Authorization": f"Token {stranger_token}"}, timeout=10)
    assert (refused.status_code, refused.json()["code"]) == (404, "not_found")
