"""The request-body limit of design §16.5, in the ASGI application, before Django or DRF read anything.

Django's ASGI handler spools any body to disk before a view runs and DRF reads a stream past
`DATA_UPLOAD_MAX_MEMORY_SIZE`, so a limit inside Django comes too late. A declared `Content-Length` over
`HETEROFLOW_MAX_BODY_BYTES` is refused at once, unread; a body without one (chunked) is counted as it arrives and
refused as soon as it passes the limit. Bodies within it are handed on unchanged. Either refusal is the API's JSON
error shape with status 413.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOO_LARGE_CODE = "request_too_large"


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(send)
            return
        if declared is not None:
            # The server delivers no more than the declared length (h11 and Daphne enforce it).
            await self.app(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                # The client went away: the application hears it as it would have.
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)

    async def _refuse(self, send: Send) -> None:
        payload = json.dumps({"code": TOO_LARGE_CODE,
                              "message": f"the request body is over the limit of {self.max_body_bytes} bytes"}
                             ).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": payload})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or ():
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
