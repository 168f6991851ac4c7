"""Keep-alive connections handed back now and then, so that several web processes on one port share the load.

With several Daphne processes on one port (`heteroflow_site.web_workers`), the kernel gives each new connection to
one process and every request on it goes to that process for the connection's life: a few long-lived clients (node
agents, a CLI polling, the browsers of a team) can keep one process saturated while another idles (`bench_api
--web-processes 2`: 117 or 182 requests/s from one run to the next, as the connections fell). Here about one HTTP/1.1
response in `HETEROFLOW_REQUESTS_PER_CONNECTION` carries `Connection: close`, as nginx's `keepalive_requests` closes
a connection after a count: the client opens a new connection for its next request, and the process free to accept
it first — the least busy — takes it. Chosen at random rather than counted: ASGI names no connection, and a count per
client address would outlive the connections clients close themselves.
"""

from __future__ import annotations

import random

from heteroflow_site.body_limit import ASGIApp, Message, Receive, Scope, Send


class KeepAliveLimitMiddleware:
    def __init__(self, app: ASGIApp, *, requests_per_connection: int, rng: random.Random | None = None) -> None:
        """`requests_per_connection`: the mean count of requests a connection serves; 0, as many as its client
        likes."""
        self.app = app
        self.chance = 1 / requests_per_connection if requests_per_connection > 0 else 0.0
        self.rng = rng or random.Random()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # HTTP/2 has no Connection header, and an HTTP/1.0 connection closes after each response anyway.
        if scope["type"] != "http" or scope.get("http_version") != "1.1" or self.rng.random() >= self.chance:
            await self.app(scope, receive, send)
            return

        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(name, value) for name, value in message.get("headers", [])
                           if name.lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await self.app(scope, receive, closing)
