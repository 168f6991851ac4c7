"""Request bodies (design §16.5): over `HETEROFLOW_MAX_BODY_BYTES` a 413 before anything reads them, chunked bodies
counted too; JSON nested deeper than 64 levels a 400."""

import asyncio
import http.client
import json
from urllib.parse import urlsplit

import pytest
import requests

from heteroflow_site.body_limit import BodyLimitMiddleware
from scheduling.models import Task
from tests.processes import daphne_serving

LIMIT = 1000


def _through_the_middleware(messages, headers):
    """What an application behind the middleware received and what the client was sent."""
    seen, sent = [], []

    async def app(scope, receive, send):
        while True:
            message = await receive()
            seen.append(message)
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/v1/tasks", "headers": headers}
    asyncio.run(BodyLimitMiddleware(app, max_body_bytes=LIMIT)(scope, receive, send))
    return seen, sent


def test_a_declared_length_over_the_limit_is_refused_unread():
    body = [{"type": "http.request", "body": b"x" * (LIMIT + 1), "more_body": False}]
    seen, sent = _through_the_middleware(body, [(b"content-length", str(LIMIT + 1).encode())])
    assert seen == [] and sent[0]["status"] == 413
    assert len(body) == 1, "the body was never read"
    assert json.loads(sent[1]["body"])["code"] == "request_too_large"


def test_a_chunked_body_is_counted_and_refused_once_over_the_limit():
    chunks = [{"type": "http.request", "body": b"x" * 600, "more_body": True} for _ in range(5)]
    seen, sent = _through_the_middleware(chunks, [(b"transfer-encoding", b"chunked")])
    assert seen == [] and sent[0]["status"] == 413
    assert len(chunks) == 3, "reading stopped at the chunk that passed the limit"


def test_a_chunked_body_within_the_limit_reaches_the_application_whole():
    chunks = [{"type": "http.request", "body": b"ab", "more_body": True},
              {"type": "http.request", "body": b"cd", "more_body": False}]
    seen, sent = _through_the_middleware(chunks, [])
    assert seen == [{"type": "http.request", "body": b"abcd", "more_body": False}]
    assert sent[0]["status"] == 200


@pytest.mark.django_db(transaction=True)
def test_daphne_refuses_a_large_body_before_authentication_and_takes_a_small_one(tmp_path):
    with daphne_serving(log=tmp_path / "server.log", HETEROFLOW_MAX_BODY_BYTES=str(LIMIT)) as base:
        declared = requests.post(f"{base}/api/v1/tasks", data=b"[" * (LIMIT + 1),
                                 headers={"Content-Type": "application/json"}, timeout=10)
        address = urlsplit(base)
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
        connection.request("POST", "/api/v1/tasks", body=iter([b"[" * 600] * 4),
                           headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
                           encode_chunked=True)
        chunked = connection.getresponse()
        small = requests.post(f"{base}/api/v1/tasks", json={"name": "t"}, timeout=10)

    assert declared.status_code == 413 and declared.json()["code"] == "request_too_large"
    assert chunked.status == 413
    assert small.status_code == 401, "a body within the limit goes on to authentication"


@pytest.mark.django_db
@pytest.mark.parametrize("depth", [65, 100_000])
def test_json_nested_deeper_than_64_levels_is_a_400_and_changes_nothing(tenant_client, depth):
    body = "[" * depth + "]" * depth
    response = tenant_client.post("/api/v1/tasks", body, content_type="application/json")
    assert response.status_code == 400
    assert "nested deeper than 64 levels" in response.json()["message"]
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_json_64_levels_deep_is_parsed(tenant_client):
    labels = {"a": "b"}
    for _ in range(62):
        labels = {"x": labels}
    response = tenant_client.post("/api/v1/tasks", {"name": "t", "labels": labels}, format="json")
    assert response.status_code == 400 and response.json()["field"].startswith("labels")
