"""The websockets against the real Redis channel layer: staff-only diagnostics, tenant-isolated task pushes."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from heteroflow_site.websocket_urls import websocket_urlpatterns
from scheduling.web import live
from scheduling.models import CycleRecord, Task
from scheduling.services.task_transition import task_transition
from scheduling.signals import cycle_completed, task_transitioned
from tests.factories import make_task

application = URLRouter(websocket_urlpatterns)
NOTHING_WITHIN = 0.6


async def _connect(path: str, user) -> tuple[WebsocketCommunicator, bool]:
    communicator = WebsocketCommunicator(application, path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=3)
    return communicator, connected


async def _stop(task_id: int) -> None:
    await database_sync_to_async(task_transition)(task_id, "pending", "stopped", reason="stopped by user")


@pytest.mark.django_db(transaction=True)
def test_task_pushes_reach_the_tenant_and_admins_but_never_another_tenant(
        tenant, tenant_client, other_tenant_client, admin_user):
    task = make_task(tenant=tenant, name="private-task")

    async def scenario():
        mine, ok_mine = await _connect("/ws/tasks/", tenant_client.user)
        other, ok_other = await _connect("/ws/tasks/", other_tenant_client.user)
        admin, ok_admin = await _connect("/ws/tasks/", admin_user)
        assert ok_mine and ok_other and ok_admin
        await _stop(task.id)
        own_row = await mine.receive_from(timeout=3)
        admin_row = await admin.receive_from(timeout=3)
        assert await other.receive_nothing(timeout=NOTHING_WITHIN)
        for communicator in (mine, other, admin):
            await communicator.disconnect()
        return own_row, admin_row

    own_row, admin_row = async_to_sync(scenario)()
    assert f'<tr id="task-row-{task.id}" data-status="stopped" hx-swap-oob="true">' in own_row
    assert "pill-stopped" in own_row and "private-task" in own_row
    assert "<td>acme</td>" not in own_row and "<td>acme</td>" in admin_row


@pytest.mark.django_db(transaction=True)
def test_the_committing_thread_only_notes_the_change_and_the_socket_reads_and_renders_the_rows(
        tenant, tenant_client, django_assert_num_queries):
    tasks = [make_task(tenant=tenant, name=f"burst-{index}") for index in range(3)]

    def transitions_sent():
        with django_assert_num_queries(0):
            for task in tasks:
                task_transitioned.send(sender=Task, task_id=task.id, tenant_id=tenant.id, from_status="pending",
                                       to_status="stopped", reason="")

    async def scenario():
        mine, connected = await _connect("/ws/tasks/", tenant_client.user)
        assert connected
        await database_sync_to_async(transitions_sent)()
        received = ""
        while not all(f'id="task-row-{task.id}"' in received for task in tasks):
            received += await mine.receive_from(timeout=3)
        await mine.disconnect()
        return received

    received = async_to_sync(scenario)()
    assert all(f"burst-{index}" in received for index in range(3))


@pytest.mark.django_db(transaction=True)
def test_a_tenant_socket_renders_only_its_own_tenants_rows_whatever_the_message_names(
        tenant, other_tenant, tenant_client):
    mine, theirs = make_task(tenant=tenant, name="mine"), make_task(tenant=other_tenant, name="theirs")

    async def scenario():
        communicator, connected = await _connect("/ws/tasks/", tenant_client.user)
        assert connected
        await database_sync_to_async(live.publish)(live.tenant_group(tenant.id),
                                                   {"type": "task.status", "task_ids": [theirs.id, mine.id]})
        message = await communicator.receive_from(timeout=3)
        await communicator.disconnect()
        return message

    message = async_to_sync(scenario)()
    assert f'id="task-row-{mine.id}"' in message and "theirs" not in message


@pytest.mark.django_db(transaction=True)
def test_task_socket_refuses_anonymous_users():
    async def scenario():
        communicator, connected = await _connect("/ws/tasks/", AnonymousUser())
        await communicator.disconnect()
        return connected

    assert async_to_sync(scenario)() is False


@pytest.mark.django_db(transaction=True)
def test_diagnostics_socket_is_staff_only(tenant_client):
    async def scenario():
        communicator, connected = await _connect("/ws/diagnostics/", tenant_client.user)
        await communicator.disconnect()
        return connected

    assert async_to_sync(scenario)() is False


@pytest.mark.django_db(transaction=True)
def test_a_completed_cycle_is_pushed_to_staff_as_the_recent_cycles_fragment(admin_user):
    async def scenario():
        communicator, connected = await _connect("/ws/diagnostics/", admin_user)
        assert connected
        record = await database_sync_to_async(CycleRecord.objects.create)(
            started_at=timezone.now(), considered=3, bound=2, failed=1, duration_ms=4.5)
        await database_sync_to_async(cycle_completed.send)(sender=CycleRecord, cycle_id=record.id, considered=3,
                                                           bound=2, failed=1, preempting=0, duration_ms=4.5)
        message = await communicator.receive_from(timeout=3)
        await communicator.disconnect()
        return record, message

    record, message = async_to_sync(scenario)()
    assert message.lstrip().startswith('<div id="recent-cycles" hx-swap-oob="true"')
    assert f'id="cycle-{record.id}"' in message and "4.5 ms" in message


def test_broadcast_errors_are_swallowed_and_logged(monkeypatch, caplog):
    def unreachable(*args, **kwargs):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(live.publisher, "publish", unreachable)
    live.publish("diagnostics", {"type": "cycle.summary", "html": ""})
    assert "live update not sent" in caplog.text


def test_unreachable_channel_layer_only_logs(settings, caplog):
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}}
    channel_layers.backends.clear()
    try:
        live.publish("diagnostics", {"type": "cycle.summary", "html": ""})
        deadline = asyncio.run(_wait_for(lambda: "not delivered" in caplog.text))
    finally:
        channel_layers.backends.clear()
    assert deadline, caplog.text


async def _wait_for(condition, seconds: float = 5.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return True
        await asyncio.sleep(0.05)
    return False


def test_an_idle_socket_outlasts_the_layers_blocking_pop():
    # An idle consumer's socket waits out a whole empty blocking pop; at redis-py 8's default 5 s read timeout it
    # raced the pop's own 5 s answer and a websocket died with "Timeout reading from …" mid-test.
    from channels.layers import get_channel_layer
    from channels_redis.utils import create_pool

    layer = get_channel_layer()
    pool = create_pool(layer.hosts[0])
    assert pool.connection_kwargs["socket_timeout"] > layer.brpop_timeout + 5


@pytest.mark.django_db
def test_the_scheduler_announces_a_cycle_without_reading_or_rendering(django_assert_num_queries, monkeypatch):
    sent = []
    monkeypatch.setattr(live.publisher, "publish", lambda group, message: sent.append((group, message)))
    with django_assert_num_queries(0):
        live.broadcast_cycle(sender=CycleRecord, cycle_id=1)

    assert sent == [("diagnostics", {"type": "cycle.summary"})]
