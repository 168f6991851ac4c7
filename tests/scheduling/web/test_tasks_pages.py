import pytest

from scheduling.models import SchedulingAttempt, Task, TaskEvent
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task
from tests.web_clients import HTMX

VALID_JOB = {"name": "train-resnet", "type": "batch", "image": "img:1", "command": "python train.py",
             "gpu_type": "nvidia", "gpu_required": "2", "gpu_memory_mb": "", "gpu_compute_percent": "",
             "cpu_cores": "4", "memory_mb": "8192", "priority": "70",
             "label_key": ["nvlink", ""], "label_value": ["required", ""]}


@pytest.mark.django_db
def test_tenant_task_list_shows_only_its_own_tasks(tenant_web, tenant, other_tenant):
    mine = make_task(tenant=tenant, name="mine-task")
    make_task(tenant=other_tenant, name="their-task")
    page = tenant_web.get("/tasks/").content.decode()
    assert "mine-task" in page and f'id="task-row-{mine.id}"' in page
    assert "their-task" not in page


@pytest.mark.django_db
def test_admin_task_list_shows_every_tenant_with_tenant_filter(admin_web, tenant, other_tenant):
    make_task(tenant=tenant, name="mine-task")
    make_task(tenant=other_tenant, name="their-task")
    page = admin_web.get("/tasks/").content.decode()
    assert "mine-task" in page and "their-task" in page
    filtered = admin_web.get(f"/tasks/?tenant={other_tenant.id}").content.decode()
    assert "their-task" in filtered and "mine-task" not in filtered


@pytest.mark.django_db
def test_task_list_filters_by_status_and_serves_the_table_fragment_to_htmx(tenant_web, tenant):
    running = make_task(tenant=tenant, name="running-task")
    make_task(tenant=tenant, name="waiting-task")
    Task.objects.filter(id=running.id).update(status="running")
    fragment = tenant_web.get("/tasks/?status=running", **HTMX).content.decode()
    assert fragment.lstrip().startswith('<div id="task-table"')
    assert 'hx-trigger="every 3s"' in fragment
    assert "<html" not in fragment
    assert "running-task" in fragment and "waiting-task" not in fragment
    active = tenant_web.get("/tasks/?status=active", **HTMX).content.decode()
    assert "running-task" in active and "waiting-task" not in active


@pytest.mark.django_db
def test_job_form_creates_the_task_through_the_api_validation(tenant_web, tenant):
    response = tenant_web.post("/tasks/new/", VALID_JOB)
    task = Task.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/tasks/{task.id}/"
    assert (task.tenant, task.gpu_required, task.priority, task.cpu_cores) == (tenant, 2, 70, 4.0)
    assert task.labels == {"nvlink": "required"} and task.preemptible is False


@pytest.mark.django_db
def test_job_form_shows_the_api_error_beside_the_field_and_creates_nothing(tenant_web):
    response = tenant_web.post("/tasks/new/", {**VALID_JOB, "gpu_required": "-1"})
    page = response.content.decode()
    assert response.status_code == 400
    assert '<div class="field-error" data-field="gpu_required">' in page
    assert 'value="-1"' in page  # the user's input is kept
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_job_form_refuses_preemptible_training_like_the_api(tenant_web):
    response = tenant_web.post("/tasks/new/", {**VALID_JOB, "type": "training", "preemptible": "on"})
    assert response.status_code == 400
    assert '<div class="field-error" data-field="preemptible">' in response.content.decode()
    assert not Task.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("timeout,grace,stored,shown", [
    ("", "", (7200, 10), "Timeout 7200 s · grace 10 s"),
    ("none", "30", (None, 30), "Runs until stopped · grace 30 s"),
    ("600", "0", (600, 0), "Timeout 600 s · grace 0 s"),
])
def test_job_form_takes_the_timeout_and_grace_and_the_task_page_shows_them(tenant_web, settings, timeout, grace,
                                                                           stored, shown):
    """design §17.1."""
    settings.SCHEDULER = {**settings.SCHEDULER, "default_task_timeout": 7200}
    response = tenant_web.post("/tasks/new/", {**VALID_JOB, "timeout_seconds": timeout,
                                               "termination_grace_seconds": grace})

    task = Task.objects.get()
    assert (task.timeout_seconds, task.termination_grace_seconds) == stored
    assert shown in tenant_web.get(response["Location"]).content.decode()


@pytest.mark.django_db
def test_job_form_refuses_a_timeout_under_a_minute_beside_the_field(tenant_web):
    response = tenant_web.post("/tasks/new/", {**VALID_JOB, "timeout_seconds": "59"})
    assert response.status_code == 400
    assert '<div class="field-error" data-field="timeout_seconds">' in response.content.decode()
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_admin_must_choose_the_tenant(admin_web, tenant):
    missing = admin_web.post("/tasks/new/", VALID_JOB)
    assert missing.status_code == 400
    assert 'data-field="tenant"' in missing.content.decode()
    assert not Task.objects.exists()
    created = admin_web.post("/tasks/new/", {**VALID_JOB, "tenant": str(tenant.id)})
    assert created.status_code == 302
    assert Task.objects.get().tenant == tenant


@pytest.mark.django_db
def test_tenant_form_has_no_tenant_choice(tenant_web, admin_web):
    assert 'name="tenant"' not in tenant_web.get("/tasks/new/").content.decode()
    assert 'name="tenant"' in admin_web.get("/tasks/new/").content.decode()


@pytest.mark.django_db
def test_another_tenants_task_page_is_404(tenant_web, other_tenant):
    theirs = make_task(tenant=other_tenant)
    assert tenant_web.get(f"/tasks/{theirs.id}/").status_code == 404
    assert tenant_web.post(f"/tasks/{theirs.id}/", {"action": "stop"}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == "pending"


@pytest.mark.django_db
def test_task_page_shows_timeline_and_why_pending(tenant_web, tenant):
    task = make_task(tenant=tenant, name="waiting")
    node = make_node(cards=8, name="gpu-a")
    task_transition(task.id, "pending", "scheduled", reason="bound", node=node, gpus=[0])
    task_transition(task.id, "scheduled", "pending", reason="bind rolled back")
    SchedulingAttempt.objects.create(
        task=task, code="InsufficientResources",
        message="0/4 nodes are available: 3 Insufficient GPU, 1 GPU type mismatch.",
        nodes={
            "filtered": {"GPU type mismatch": ["n4"], "Insufficient GPU": ["n1", "n2", "n3"]},
            "plugins": ["nvlink", "spread"],
            "scored": [["best", 140, 60, 80], ["second", 70, 50, 20]],
        },
    )
    page = tenant_web.get(f"/tasks/{task.id}/").content.decode()
    assert "0/4 nodes are available: 3 Insufficient GPU, 1 GPU type mismatch." in page
    assert page.index("Insufficient GPU</td><td class=\"num\"><strong>3") < page.index("GPU type mismatch</td>")
    assert '<span class="tag">n4</span>' in page
    matrix = page[page.index('id="score-matrix"'):]
    assert matrix.index("<strong>best</strong>") < matrix.index("<strong>second</strong>")
    assert "<th class=\"num\">nvlink</th><th class=\"num\">spread</th>" in matrix
    assert TaskEvent.objects.filter(task=task).count() == 2
    assert "bind rolled back" in page
    assert 'value="stop"' in page


@pytest.mark.django_db
def test_task_page_fragment_is_polled_while_the_task_lives(tenant_web, tenant):
    task = make_task(tenant=tenant)
    fragment = tenant_web.get(f"/tasks/{task.id}/", **HTMX).content.decode()
    assert fragment.lstrip().startswith('<div id="task-live" hx-get=')
    Task.objects.filter(id=task.id).update(status="succeeded")
    finished = tenant_web.get(f"/tasks/{task.id}/", **HTMX).content.decode()
    assert "hx-trigger" not in finished.split(">", 1)[0]


@pytest.mark.django_db
def test_stop_button_stops_a_pending_task(tenant_web, tenant):
    task = make_task(tenant=tenant)
    response = tenant_web.post(f"/tasks/{task.id}/", {"action": "stop"})
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.status == "stopped"
    assert 'value="stop"' not in tenant_web.get(f"/tasks/{task.id}/").content.decode()


@pytest.mark.django_db
def test_stop_needs_the_csrf_token(tenant_client, tenant):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(tenant_client.user)
    task = make_task(tenant=tenant)
    assert client.post(f"/tasks/{task.id}/", {"action": "stop"}).status_code == 403
    task.refresh_from_db()
    assert task.status == "pending"


@pytest.mark.django_db
def test_job_form_refuses_a_gpu_model_label_that_names_no_model_beside_the_labels(tenant_web):
    response = tenant_web.post("/tasks/new/", {**VALID_JOB, "label_key": ["gpu-model"], "label_value": [" | "]})
    assert response.status_code == 400
    assert '<div class="field-error" data-field="labels">' in response.content.decode()
    assert not Task.objects.exists()
