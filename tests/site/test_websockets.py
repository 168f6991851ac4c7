"""Every websocket keeps to a per-user cap and checks its user's right again while open (issue 27 item 10)."""

import contextlib

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.test import Client

from heteroflow_site import websockets
from heteroflow_site.websocket_urls import websocket_urlpatterns
from tests.factories import make_task

application = URLRouter(websocket_urlpatterns)
pytestmark = pytest.mark.django_db(transaction=True)


_opened: list[WebsocketCommunicator] = []


@pytest.fixture(autouse=True)
def _quick_checks(settings):
    settings.HETEROFLOW_WEBSOCKET_RECHECK_SECONDS = 0.2
    client = websockets._redis()
    for key in client.scan_iter(f"{websockets.KEY_PREFIX}*"):
        client.delete(key)
    _opened.clear()


def _run(scenario) -> None:
    """The scenario, then every socket it opened closed, whether it passed or failed: a socket left open keeps its
    periodic check running into the event loop's shutdown."""

    async def closing_every_socket():
        try:
            await scenario()
        finally:
            for communicator in _opened:
                with contextlib.suppress(Exception):
                    await communicator.disconnect()

    async_to_sync(closing_every_socket)()


async def _connect(path: str, user, session=None) -> tuple[WebsocketCommunicator, bool]:
    communicator = WebsocketCommunicator(application, path)
    _opened.append(communicator)
    communicator.scope["user"] = user
    if session is not None:
        communicator.scope["session"] = session
    connected, _ = await communicator.connect(timeout=3)
    return communicator, connected


async def _closed_with(communicator: WebsocketCommunicator) -> int:
    message = await communicator.receive_output(timeout=3)
    assert message["type"] == "websocket.close"
    return message["code"]


def test_a_user_holds_at_most_the_cap_of_open_sockets(settings, tenant_client):
    """Before: any number of sockets per user, each a group membership and a connection held by the server."""
    settings.HETEROFLOW_WEBSOCKETS_PER_USER = 2
    user = tenant_client.user

    async def scenario():
        first, ok_first = await _connect("/ws/tasks/", user)
        second, ok_second = await _connect("/ws/tasks/", user)
        third, ok_third = await _connect("/ws/tasks/", user)
        assert (ok_first, ok_second, ok_third) == (True, True, False)
        await first.disconnect()
        again, ok_again = await _connect("/ws/tasks/", user)
        assert ok_again
        for communicator in (second, again):
            await communicator.disconnect()

    _run(scenario)


def test_a_socket_closes_once_its_user_left_staff(admin_user):
    """Before: a diagnostics socket opened as staff kept receiving after the user lost staff status."""

    async def scenario():
        socket, connected = await _connect("/ws/diagnostics/", admin_user)
        assert connected
        await database_sync_to_async(User.objects.filter(id=admin_user.id).update)(is_staff=False)
        assert await _closed_with(socket) == websockets.CLOSE_FORBIDDEN

    _run(scenario)


def test_a_log_socket_closes_once_its_user_is_deactivated(tenant, tenant_client):
    task = make_task(tenant=tenant)

    async def scenario():
        socket, connected = await _connect(f"/ws/tasks/{task.id}/logs/", tenant_client.user)
        assert connected
        assert await socket.receive_nothing(timeout=0.5)
        await database_sync_to_async(User.objects.filter(id=tenant_client.user.id).update)(is_active=False)
        assert await _closed_with(socket) == websockets.CLOSE_FORBIDDEN

    _run(scenario)


def test_a_socket_closes_once_its_session_logged_out(admin_user):
    client = Client()
    client.force_login(admin_user)
    session = SessionStore(session_key=client.session.session_key)

    async def scenario():
        socket, connected = await _connect("/ws/tasks/", admin_user, session=session)
        assert connected
        assert await socket.receive_nothing(timeout=0.5)
        await database_sync_to_async(client.logout)()
        assert await _closed_with(socket) == websockets.CLOSE_FORBIDDEN

    _run(scenario)


def test_an_open_socket_joins_its_group_again_at_every_check(tenant_client, monkeypatch):
    """A Redis restart empties the channel layer's groups: a socket open across it gets pushes again at its next
    check, not only once it reconnects."""
    from scheduling.web.consumers import TaskStatusConsumer

    joins = []
    join = TaskStatusConsumer.joined

    async def counted(self):
        joins.append(self.channel_name)
        await join(self)

    monkeypatch.setattr(TaskStatusConsumer, "joined", counted)

    async def scenario():
        socket, connected = await _connect("/ws/tasks/", tenant_client.user)
        assert connected
        assert await socket.receive_nothing(timeout=1)
        await socket.disconnect()

    _run(scenario)
    assert len(joins) >= 3 and len(set(joins)) == 1
