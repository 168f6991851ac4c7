"""Web processes on one port share the load: about one response in HETEROFLOW_REQUESTS_PER_CONNECTION asks its
client to reconnect (`heteroflow_site.keep_alive`)."""

import asyncio
import random

import requests
import urllib3

from heteroflow_site.keep_alive import KeepAliveLimitMiddleware
from tests.processes import daphne_serving


def _headers_sent(middleware, scope) -> list[tuple[bytes, bytes]]:
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(middleware(scope, receive, send))
    return sent[0].get("headers", [])


async def _answer(scope, receive, send):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"Connection", b"keep-alive")]})
    await send({"type": "http.response.body", "body": b"ok"})


HTTP_1_1 = {"type": "http", "http_version": "1.1", "method": "GET", "path": "/", "headers": []}


def test_about_one_response_in_n_asks_the_client_to_reconnect():
    middleware = KeepAliveLimitMiddleware(_answer, requests_per_connection=50, rng=random.Random(7))

    closing = sum((b"connection", b"close") in _headers_sent(middleware, HTTP_1_1) for _ in range(5000))

    assert 70 <= closing <= 130, closing


def test_a_closing_response_says_close_once_and_keeps_its_other_headers():
    middleware = KeepAliveLimitMiddleware(_answer, requests_per_connection=1)

    headers = _headers_sent(middleware, HTTP_1_1)

    assert headers == [(b"content-type", b"text/plain"), (b"connection", b"close")]


def test_zero_never_closes_and_neither_http_2_nor_websockets_are_touched():
    never = KeepAliveLimitMiddleware(_answer, requests_per_connection=0)
    assert all((b"connection", b"close") not in _headers_sent(never, HTTP_1_1) for _ in range(200))

    always = KeepAliveLimitMiddleware(_answer, requests_per_connection=1)
    assert (b"connection", b"close") not in _headers_sent(always, {**HTTP_1_1, "http_version": "2"})
    seen = []

    async def websocket_app(scope, receive, send):
        seen.append(scope["type"])

    asyncio.run(KeepAliveLimitMiddleware(websocket_app, requests_per_connection=1)(
        {"type": "websocket"}, None, None))
    assert seen == ["websocket"]


def test_under_daphne_a_client_told_to_close_comes_back_on_a_new_connection(tmp_path, monkeypatch):
    """The whole way: the project's application under Daphne and a keep-alive client (requests). Told to close after
    every response, it opens a connection per request; never told, it keeps one."""
    opened = []
    monkeypatch.setattr(urllib3.connection.connection, "create_connection",
                        _counting(urllib3.connection.connection.create_connection, opened))

    for requests_per_connection, connections in (("1", 3), ("0", 1)):
        opened.clear()
        with daphne_serving(log=tmp_path / f"daphne-{requests_per_connection}.log",
                            HETEROFLOW_REQUESTS_PER_CONNECTION=requests_per_connection) as base:
            opened.clear()  # the readiness probe's
            client = requests.Session()
            answers = [client.get(f"{base}/healthz", timeout=10) for _ in range(3)]
        assert all(answer.ok for answer in answers)
        assert len(opened) == connections, requests_per_connection


def _counting(create_connection, opened: list):
    def counted(*args, **kwargs):
        opened.append(args[0])
        return create_connection(*args, **kwargs)
    return counted
