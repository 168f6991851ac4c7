"""The task page's live log panel (design §16.4): the first lines, then each batch pushed over the websocket to
those who may read the task and nobody else."""

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from heteroflow_site.websocket_urls import websocket_urlpatterns
from scheduling.services.task_logs import task_log_append
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task

application = URLRouter(websocket_urlpatterns)


def _placed_task(tenant, **fields):
    node = make_node()
    task = make_task(tenant=tenant, **fields)
    assert task_transition(task.id, "pending", "scheduled", node=node)
    return task, node


@pytest.mark.django_db
def test_the_page_loads_the_panel_and_the_panel_shows_the_last_lines_escaped(tenant_web, tenant):
    task, node = _placed_task(tenant)
    task_log_append(node=node, task_id=task.id, data=b"epoch 1 loss 2.31\n<script>alert(1)</script>\n")
    page = tenant_web.get(f"/tasks/{task.id}/").content.decode()
    assert f'hx-get="/tasks/{task.id}/log/"' in page
    panel = tenant_web.get(f"/tasks/{task.id}/log/").content.decode()
    assert f'ws-connect="/ws/tasks/{task.id}/logs/"' in panel
    assert "epoch 1 loss 2.31" in panel and "&lt;script&gt;alert(1)&lt;/script&gt;" in panel
    assert "<script>alert" not in panel


@pytest.mark.django_db
def test_a_panel_without_output_says_so(tenant_web, tenant):
    task, _ = _placed_task(tenant)
    assert 'id="task-log-empty"' in tenant_web.get(f"/tasks/{task.id}/log/").content.decode()


@pytest.mark.django_db
def test_another_tenant_gets_404_and_anonymous_the_login_page(other_tenant_web, client, tenant):
    task, _ = _placed_task(tenant)
    assert other_tenant_web.get(f"/tasks/{task.id}/log/").status_code == 404
    response = client.get(f"/tasks/{task.id}/log/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


async def _connect(path: str, user) -> tuple[WebsocketCommunicator, bool]:
    communicator = WebsocketCommunicator(application, path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=3)
    return communicator, connected


@pytest.mark.django_db(transaction=True)
def test_new_lines_reach_the_tenant_and_admins_and_no_one_else(tenant, tenant_client, other_tenant_client,
                                                               admin_user):
    task, node = _placed_task(tenant)
    path = f"/ws/tasks/{task.id}/logs/"

    async def scenario():
        mine, ok_mine = await _connect(path, tenant_client.user)
        admin, ok_admin = await _connect(path, admin_user)
        _, ok_other = await _connect(path, other_tenant_client.user)
        _, ok_anonymous = await _connect(path, AnonymousUser())
        assert (ok_mine, ok_admin, ok_other, ok_anonymous) == (True, True, False, False)
        await database_sync_to_async(task_log_append)(node=node, task_id=task.id, data=b"step 7 loss <0.5>\n")
        pushed = await mine.receive_from(timeout=3), await admin.receive_from(timeout=3)
        for communicator in (mine, admin):
            await communicator.disconnect()
        return pushed

    own, admins = async_to_sync(scenario)()
    assert own == admins == '<pre class="task-log" id="task-log-lines" hx-swap-oob="beforeend">step 7 loss &lt;0.5&gt;\n</pre>'
