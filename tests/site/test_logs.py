"""One log line per request, agent polling at debug, and the request context on every record, human or JSON."""

import json
import logging
from datetime import datetime

import pytest

from heteroflow_site.logs import ContextFilter, HumanFormatter, JsonLineFormatter, set_context, reset_context
from nodes.services import agent_register
from tests.nodes.conftest import heartbeat_body, node_client

REQUEST_LOGGER = "heteroflow.request"


@pytest.fixture
def agent(db):
    _, token = agent_register(name="gpu-a", internal_ip="10.0.3.7/24", public_ip="203.0.113.7", cpu_cores=64,
                              memory_gb=512)
    return node_client(token)


def _request_lines(caplog):
    return [record for record in caplog.records if record.name == REQUEST_LOGGER]


@pytest.mark.django_db
def test_agent_polling_is_logged_at_debug_and_other_requests_at_info_one_line_each(agent, tenant_client, caplog):
    caplog.set_level(logging.DEBUG, logger=REQUEST_LOGGER)
    agent.post("/api/v1/agent/heartbeat", heartbeat_body(cards=2), format="json")
    agent.get("/api/v1/agent/work")
    tenant_client.get("/api/v1/tasks")

    lines = _request_lines(caplog)
    assert [(record.levelno, record.path) for record in lines] == [
        (logging.DEBUG, "/api/v1/agent/heartbeat"), (logging.DEBUG, "/api/v1/agent/work"),
        (logging.INFO, "/api/v1/tasks"),
    ]
    assert (lines[2].user, lines[2].tenant, lines[2].status) == ("alice", "acme", 200)


@pytest.mark.django_db
def test_at_info_level_agent_polling_writes_nothing(agent, caplog):
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)
    for _ in range(3):
        agent.post("/api/v1/agent/heartbeat", heartbeat_body(cards=2), format="json")
    assert _request_lines(caplog) == []


@pytest.mark.django_db
def test_the_request_id_is_kept_from_the_caller_or_made_and_returned(tenant_client, caplog):
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)
    given = tenant_client.get("/api/v1/tasks", HTTP_X_REQUEST_ID="edge-42")
    made = tenant_client.get("/api/v1/tasks", HTTP_X_REQUEST_ID="not a valid id!")
    assert given["X-Request-ID"] == "edge-42"
    assert made["X-Request-ID"] != "not a valid id!" and len(made["X-Request-ID"]) == 16
    assert [record.request_id for record in _request_lines(caplog)] == ["edge-42", made["X-Request-ID"]]


@pytest.mark.django_db
def test_a_task_page_request_carries_the_task_id(admin_user, tenant, caplog):
    from django.test import Client

    from tests.factories import make_task

    task = make_task(tenant=tenant)
    client = Client()
    client.force_login(admin_user)
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)
    client.get(f"/tasks/{task.id}/")
    assert _request_lines(caplog)[-1].task_id == task.id


def _record(message: str, **extra) -> logging.LogRecord:
    record = logging.LogRecord("scheduling.cycle.run", logging.INFO, __file__, 1, message, (), None)
    for key, value in extra.items():
        setattr(record, key, value)
    ContextFilter().filter(record)
    return record


def test_json_lines_carry_the_context_fields():
    token = set_context(request_id="r-1", user="alice", tenant="acme")
    try:
        record = _record("scheduler main cycle 7", cycle_id=7)
    finally:
        reset_context(token)
    line = json.loads(JsonLineFormatter().format(record))
    assert line["message"] == "scheduler main cycle 7" and line["level"] == "INFO"
    assert line["logger"] == "scheduling.cycle.run" and datetime.fromisoformat(line["time"]).tzinfo is not None
    assert (line["request_id"], line["user"], line["tenant"], line["cycle_id"]) == ("r-1", "alice", "acme", 7)


def test_human_lines_name_only_what_is_known():
    assert HumanFormatter().format(_record("plain")).endswith("INFO scheduling.cycle.run plain")
    token = set_context(request_id="r-2", user="bob", tenant="globex", task_id=12)
    try:
        line = HumanFormatter().format(_record("bound"))
    finally:
        reset_context(token)
    assert line.endswith("bound [r-2 bob@globex task=12]")
