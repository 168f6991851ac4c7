"""Task output (design §16.4): the agent's batches, the 1 MiB cap, tenants reading and following their own."""

import threading

import pytest
from django.db import connection

from nodes.services import agent_register
from scheduling.models import TaskLog
from scheduling.services.log_reading import task_log_slice
from scheduling.services import task_logs
from scheduling.services.task_transition import task_transition
from tests.factories import make_task
from tests.nodes.conftest import agent, node_client, registered  # noqa: F401  (agent and registered: fixtures)


def _agent_url(task_id: int) -> str:
    return f"/api/v1/agent/tasks/{task_id}/logs"


def _url(task_id: int) -> str:
    return f"/api/v1/tasks/{task_id}/logs"


def ship(client, task_id: int, data: bytes):
    return client.generic("POST", _agent_url(task_id), data, content_type="text/plain")


@pytest.fixture
def running_task(registered, tenant):
    task = make_task(tenant=tenant, gpu_required=0)
    assert task_transition(task.id, "pending", "scheduled", node=registered[0])
    assert task_transition(task.id, "scheduled", "running")
    return task


class TestAgentAppends:
    def test_batches_are_appended_and_read_back_as_text(self, agent, running_task, tenant_client):
        assert ship(agent, running_task.id, b"epoch 1 loss 2.31\n").json() == {"offset": 18}
        assert ship(agent, running_task.id, "epoch 2 loss 1.87 ✓\n".encode()).status_code == 200
        response = tenant_client.get(_url(running_task.id))
        assert response.status_code == 200
        assert response["Content-Type"] == "text/plain; charset=utf-8"
        assert response.content.decode() == "epoch 1 loss 2.31\nepoch 2 loss 1.87 ✓\n"
        assert (response["X-Log-Offset"], response["X-Log-Dropped"]) == ("40", "0")

    def test_a_task_of_another_node_is_404_and_nothing_is_kept(self, db, running_task, tenant):
        _, other_token = agent_register(name="gpu-b", internal_ip="10.0.3.8/24", public_ip="203.0.113.8",
                                        cpu_cores=8, memory_gb=64)
        response = ship(node_client(other_token), running_task.id, b"not mine\n")
        assert response.status_code == 404
        unplaced = make_task(tenant=tenant)
        assert ship(node_client(other_token), unplaced.id, b"pending\n").status_code == 404
        assert not TaskLog.objects.exists()

    def test_a_user_token_may_not_append(self, tenant_client, running_task):
        assert ship(tenant_client, running_task.id, b"forged\n").status_code in (401, 403)
        assert not TaskLog.objects.exists()

    def test_a_batch_over_the_bound_is_413_and_an_empty_one_400(self, agent, running_task):
        too_big = ship(agent, running_task.id, b"x" * (task_logs.LOG_BATCH_MAX_BYTES + 1))
        assert (too_big.status_code, too_big.json()["code"]) == (413, "payload_too_large")
        empty = ship(agent, running_task.id, b"")
        assert (empty.status_code, empty.json()["field"]) == (400, "body")
        assert not TaskLog.objects.exists()

    def test_a_finished_task_takes_its_final_flush(self, agent, running_task, tenant_client):
        assert task_transition(running_task.id, "running", "succeeded")
        assert ship(agent, running_task.id, b"done\n").status_code == 200
        assert tenant_client.get(_url(running_task.id)).content == b"done\n"


class TestOneMebibyteKept:
    def test_the_oldest_bytes_are_dropped_first(self, agent, running_task, tenant_client, monkeypatch):
        monkeypatch.setattr(task_logs, "TASK_LOG_MAX_BYTES", 10)
        for batch in (b"0123", b"456789", b"abcdef"):
            assert ship(agent, running_task.id, batch).status_code == 200
        response = tenant_client.get(_url(running_task.id))
        assert response.content == b"6789abcdef"
        assert (response["X-Log-Offset"], response["X-Log-Dropped"]) == ("16", "6")
        # One batch bigger than the cap keeps only its own end.
        assert ship(agent, running_task.id, b"ABCDEFGHIJKLMN").status_code == 200
        response = tenant_client.get(_url(running_task.id))
        assert (response.content, response["X-Log-Dropped"]) == (b"EFGHIJKLMN", "20")

    def test_the_real_cap_is_one_mebibyte(self, agent, running_task):
        line = b"x" * 1023 + b"\n"
        for _ in range(5):
            assert ship(agent, running_task.id, line * 255).status_code == 200
        log = TaskLog.objects.get(task=running_task)
        assert (log.kept_bytes, log.dropped_bytes) == (1024 * 1024, 5 * 255 * 1024 - 1024 * 1024)
        assert len(task_log_slice(task_id=running_task.id).text) == 1024 * 1024


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_of_one_task_are_all_kept(registered, tenant):
    task = make_task(tenant=tenant)
    assert task_transition(task.id, "pending", "scheduled", node=registered[0])
    node = registered[0]
    barrier = threading.Barrier(4)

    def append(worker: int) -> None:
        barrier.wait()
        try:
            for _ in range(25):
                task_logs.task_log_append(node=node, task_id=task.id, data=f"{worker}\n".encode())
        finally:
            connection.close()

    threads = [threading.Thread(target=append, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    content = task_log_slice(task_id=task.id).text
    assert sorted(content.split()) == sorted(str(worker) for worker in range(4) for _ in range(25))


class TestReading:
    def test_another_tenant_gets_404_an_admin_reads_it(self, agent, running_task, other_tenant_client,
                                                       admin_client):
        ship(agent, running_task.id, b"secret weights path\n")
        response = other_tenant_client.get(_url(running_task.id))
        assert (response.status_code, response.json()["code"]) == (404, "not_found")
        assert admin_client.get(_url(running_task.id)).content == b"secret weights path\n"

    def test_tail_gives_the_last_lines(self, agent, running_task, tenant_client):
        ship(agent, running_task.id, b"one\ntwo\nthree\nfour")
        assert tenant_client.get(_url(running_task.id), {"tail": 2}).content == b"three\nfour"
        assert tenant_client.get(_url(running_task.id), {"tail": 10}).content == b"one\ntwo\nthree\nfour"
        ship(agent, running_task.id, b"\n")
        assert tenant_client.get(_url(running_task.id), {"tail": 1}).content == b"four\n"

    def test_offset_follows_only_what_is_new(self, agent, running_task, tenant_client):
        ship(agent, running_task.id, b"step 1\n")
        first = tenant_client.get(_url(running_task.id))
        ship(agent, running_task.id, b"step 2\n")
        after = tenant_client.get(_url(running_task.id), {"offset": first["X-Log-Offset"]})
        assert (after.content, after["X-Log-Offset"]) == (b"step 2\n", "14")
        nothing = tenant_client.get(_url(running_task.id), {"offset": 14})
        assert (nothing.content, nothing["X-Log-Offset"]) == (b"", "14")

    def test_a_task_without_output_is_empty(self, running_task, tenant_client):
        response = tenant_client.get(_url(running_task.id))
        assert (response.status_code, response.content, response["X-Log-Offset"]) == (200, b"", "0")

    def test_text_plain_may_be_asked_for_and_errors_stay_json(self, running_task, tenant_client):
        assert tenant_client.get(_url(running_task.id), HTTP_ACCEPT="text/plain").status_code == 200
        refused = tenant_client.get(_url(running_task.id), {"tail": 0}, HTTP_ACCEPT="text/plain")
        assert (refused.status_code, refused.json()["field"]) == (400, "tail")

    @pytest.mark.parametrize(("params", "field"), [({"tail": "x"}, "tail"), ({"tail": 100_001}, "tail"),
                                                   ({"offset": -1}, "offset"), ({"format": ""}, "format"),
                                                   ({"format": "xml"}, "format")])
    def test_bad_parameters_are_400_naming_them(self, running_task, tenant_client, params, field):
        response = tenant_client.get(_url(running_task.id), params)
        assert (response.status_code, response.json()["field"]) == (400, field)
