"""Faults of the real services (issue 13): a PostgreSQL connection killed in the middle of a cycle, Redis stopped
while tasks are submitted. Nothing is left half-written and the ledgers equal the recount afterwards."""

import subprocess
import time

import pytest
import redis
from django.db import InterfaceError, OperationalError, connection, connections

from nodes.models import Node
from scheduling import lifecycle
from scheduling.queue import immediate_queue
from scheduling.bench.network import free_port
from scheduling.cycle.run import run_cycle
from scheduling.models import SchedulingAttempt, Task
from scheduling.housekeeping.node_ledger import node_gpu_used_recount
from tests.factories import make_node, make_task

VALID = {"name": "t", "type": "batch", "gpu_required": 1}


def assert_consistent() -> None:
    """Every node's ledger equals its recount; a pending task holds nothing, an active one holds its cards."""
    for node_id in Node.objects.values_list("id", flat=True):
        assert node_gpu_used_recount(node_id=node_id) is None, f"node {node_id}'s ledger drifted"
    for task in Task.objects.all():
        if task.status == lifecycle.PENDING:
            assert task.node_id is None and task.gpus == [], task
        elif task.status in lifecycle.ACTIVE_STATES:
            assert task.node_id is not None and len(task.gpus) == task.gpu_required, task


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kill_before", [
    f"UPDATE {Task._meta.db_table}",  # the bind: nothing of the batch may stay
    f"INSERT INTO {SchedulingAttempt._meta.db_table}",  # after the binds committed, before the diagnostics
])
def test_a_cycle_whose_database_connection_is_killed_mid_cycle_leaves_no_half_state(tenant, kill_before):
    for _ in range(2):
        make_node(cards=8)
    for _ in range(24):
        make_task(tenant=tenant, gpu_required=1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        cycle_pid = cursor.fetchone()[0]
    killer = connections.create_connection("default")
    killed = []

    def kill_before_the_statement(execute, sql, params, many, context):
        if kill_before in sql.replace('"', "") and not killed:
            with killer.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(%s)", [cycle_pid])
            killed.append(sql)
        return execute(sql, params, many, context)

    try:
        with connection.execute_wrapper(kill_before_the_statement):
            # The cycle may give up with the connection, or retry the batch task by task on a new one: either
            # way nothing may be left half-written.
            try:
                run_cycle()
            except (OperationalError, InterfaceError):
                pass
    finally:
        killer.close()
    connection.close()  # the killed connection is gone for good; the next query opens a new one

    assert killed
    assert_consistent()
    run_cycle()
    assert Task.objects.filter(status=lifecycle.SCHEDULED).count() == 16
    assert_consistent()



def _start_redis(port: int) -> subprocess.Popen:
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_connect_timeout=0.5)
    deadline = time.monotonic() + 15
    while True:
        try:
            client.ping()
            return server
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.05)


@pytest.fixture
def own_redis(settings):
    """A redis-server of this test's own on a free port (never the machine's), and the settings pointing at it."""
    port = free_port()
    holder = {"server": _start_redis(port), "port": port}
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    yield holder
    holder["server"].terminate()
    holder["server"].wait(timeout=10)


@pytest.mark.django_db(transaction=True)
def test_submissions_while_redis_is_down_are_kept_and_scheduled(own_redis, tenant_client):
    make_node(cards=4)
    assert tenant_client.post("/api/v1/tasks", VALID, format="json").status_code == 201
    assert immediate_queue.length() == 1

    own_redis["server"].terminate()
    own_redis["server"].wait(timeout=10)
    answers = [tenant_client.post("/api/v1/tasks", VALID, format="json").status_code for _ in range(2)]
    assert answers == [201, 201], "the API answers without Redis"
    assert tenant_client.get("/api/v1/tasks").status_code == 200
    assert Task.objects.filter(status=lifecycle.PENDING).count() == 3, "no submission lost"

    own_redis["server"] = _start_redis(own_redis["port"])
    assert tenant_client.post("/api/v1/tasks", VALID, format="json").status_code == 201
    assert immediate_queue.length() == 1, "the queue works again once Redis is back"
    result = run_cycle()
    assert result.bound == 4 and not Task.objects.filter(status=lifecycle.PENDING).exists()
    assert_consistent()


@pytest.mark.django_db(transaction=True)
def test_after_redis_comes_back_the_channel_layer_and_the_immediate_queue_work_in_the_same_process(own_redis,
                                                                                                  settings):
    """Redis restarted empty (it keeps nothing): the process that used it before needs no restart. The groups were
    in Redis too, so a socket joins its group again (its consumer does at connect; htmx reconnects a closed one)."""
    from asgiref.sync import async_to_sync, sync_to_async
    from channels.layers import get_channel_layer

    host = settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]
    settings.CHANNEL_LAYERS = {"default": {**settings.CHANNEL_LAYERS["default"],
                                           "CONFIG": {"hosts": [{**host, "address": settings.REDIS_URL}]}}}
    layer = get_channel_layer()

    async def round_trip(text: str) -> dict:
        channel = await layer.new_channel()
        await layer.group_add("restart-test", channel)
        await layer.group_send("restart-test", {"type": "note", "text": text})
        return await layer.receive(channel)

    def restart_redis() -> None:
        own_redis["server"].terminate()
        own_redis["server"].wait(timeout=10)
        own_redis["server"] = _start_redis(own_redis["port"])

    async def across_the_restart() -> tuple[dict, dict, float]:
        # One event loop throughout, so the layer's connections from before the restart are the ones it meets.
        before = await round_trip("before")
        await sync_to_async(restart_redis)()
        restarted = time.monotonic()
        return before, await round_trip("after"), restarted

    immediate_queue.push(1)
    before, after, restarted = async_to_sync(across_the_restart)()

    assert (before["text"], after["text"]) == ("before", "after")
    assert not immediate_queue.work_waiting(), "the queue came back empty"
    assert immediate_queue.push(2) and immediate_queue.drain() == [2]
    assert time.monotonic() - restarted < 10
