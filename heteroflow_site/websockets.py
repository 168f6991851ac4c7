"""What every websocket of the site keeps to: at most `HETEROFLOW_WEBSOCKETS_PER_USER` open at once per user (a
page left open in many tabs, or a script, cannot hold the server's connections), and the right to watch checked
again every `HETEROFLOW_WEBSOCKET_RECHECK_SECONDS` while the socket is open — a user logged out, deactivated, whose
password changed, who left staff or whose task went away stops receiving at the next check, not when the tab closes.

The open sockets are counted in Redis, per user a sorted set of channel names scored by a lease that each check
renews, so the sockets of a server that died without closing them stop counting once their lease runs out.
"""

import asyncio
import contextlib
import logging
import time
from functools import lru_cache
from importlib import import_module
from types import SimpleNamespace

import redis
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.models import AnonymousUser

logger = logging.getLogger(__name__)

KEY_PREFIX = "heteroflow:websockets:user:"
CLOSE_FORBIDDEN = 4403
CLOSE_TOO_MANY = 4429
# A socket counts this many checks' time after its last one: a few missed checks do not free its place.
LEASE_CHECKS = 3


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def _redis() -> redis.Redis:
    return _client(settings.REDIS_URL)


def _lease_seconds() -> float:
    return LEASE_CHECKS * settings.HETEROFLOW_WEBSOCKET_RECHECK_SECONDS


def take_place(user_id: int, channel: str) -> bool:
    """Count `channel` among the user's open sockets; False (and not counted) when the user has the most already."""
    key, now = f"{KEY_PREFIX}{user_id}", time.time()
    pipe = _redis().pipeline()
    pipe.zremrangebyscore(key, "-inf", now)
    pipe.zadd(key, {channel: now + _lease_seconds()})
    pipe.zcard(key)
    pipe.expire(key, int(_lease_seconds()) + 1)
    _, _, count, _ = pipe.execute()
    if count <= settings.HETEROFLOW_WEBSOCKETS_PER_USER:
        return True
    _redis().zrem(key, channel)
    return False


def renew_place(user_id: int, channel: str) -> None:
    key = f"{KEY_PREFIX}{user_id}"
    pipe = _redis().pipeline()
    pipe.zadd(key, {channel: time.time() + _lease_seconds()}, xx=True)
    pipe.expire(key, int(_lease_seconds()) + 1)
    pipe.execute()


def leave_place(user_id: int, channel: str) -> None:
    _redis().zrem(f"{KEY_PREFIX}{user_id}", channel)


def current_user(scope) -> object:
    """The scope's user as the database and the session hold it now: AnonymousUser once logged out, deactivated or
    after a password change (the session's hash no longer matches)."""
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return AnonymousUser()
    session = scope.get("session")
    if session is not None and session.session_key:
        fresh = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session.session_key)
        return auth.get_user(SimpleNamespace(session=fresh))
    # A socket authenticated otherwise (tests set the user): the account itself is read again.
    return type(user)._default_manager.filter(pk=user.pk, is_active=True).first() or AnonymousUser()


class GuardedConsumer(AsyncWebsocketConsumer):
    """A consumer that admits a user only within the per-user cap and while `allowed(user)` holds. Subclasses
    define `allowed` (run in a thread: it may read the database) and `joined()` (what to do once accepted)."""

    _user_id: int | None = None
    _counted = False
    _checking: asyncio.Task | None = None

    def allowed(self, user) -> bool:
        raise NotImplementedError

    async def joined(self) -> None:
        """Called once the socket is accepted, and again at every check: joining a group twice changes nothing."""

    async def connect(self):
        user = self.scope.get("user")
        if not await database_sync_to_async(self.allowed)(user):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self._user_id = user.pk
        if not await self._take_place():
            await self.close(code=CLOSE_TOO_MANY)
            return
        await self.joined()
        await self.accept()
        self._checking = asyncio.ensure_future(self._check_periodically())

    async def disconnect(self, code):
        if self._checking is not None:
            self._checking.cancel()
            # Waited for here, while the connection's event loop and threads still serve it: a check cancelled in
            # the middle of a database call that outlived its socket blocked the loop's shutdown for good.
            with contextlib.suppress(asyncio.CancelledError):
                await self._checking
        if self._counted:
            self._counted = False
            try:
                await sync_to_async(leave_place, thread_sensitive=False)(self._user_id, self.channel_name)
            except redis.RedisError:
                logger.warning("websocket of user %s not uncounted (its lease runs out)", self._user_id,
                               exc_info=True)

    async def _take_place(self) -> bool:
        try:
            self._counted = await sync_to_async(take_place, thread_sensitive=False)(self._user_id, self.channel_name)
        except redis.RedisError:
            # The channel layer is Redis too: with Redis away nothing is pushed, and the cap is not worth a refusal.
            logger.warning("websockets of user %s not counted", self._user_id, exc_info=True)
            return True
        return self._counted

    async def _check_periodically(self) -> None:
        while True:
            await asyncio.sleep(settings.HETEROFLOW_WEBSOCKET_RECHECK_SECONDS)
            if not await self.still_allowed():
                logger.info("websocket %s closed: its user may no longer watch it", self.scope.get("path"))
                await self.close(code=CLOSE_FORBIDDEN)
                return
            try:
                # The channel layer's groups live in Redis: after a restart of it this socket is in none.
                await self.joined()
            except redis.RedisError:
                logger.warning("websocket %s did not join its group again", self.scope.get("path"), exc_info=True)
            if not self._counted:
                continue
            try:
                await sync_to_async(renew_place, thread_sensitive=False)(self._user_id, self.channel_name)
            except redis.RedisError:
                logger.warning("websocket lease not renewed", exc_info=True)

    async def still_allowed(self) -> bool:
        def check() -> bool:
            user = current_user(self.scope)
            return user.is_authenticated and user.pk == self._user_id and self.allowed(user)

        return await database_sync_to_async(check)()
