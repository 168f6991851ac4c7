"""Task group pages: the group form (validated like `POST /api/v1/task-groups`) and a group's page."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from heteroflow_site.permissions import is_admin
from heteroflow_site.serializers import FORM_TEXT
from heteroflow_site.web import render_page
from nodes.models import GPU_TYPES
from scheduling.api.group_input import TaskGroupChangeInput, TaskGroupInput
from scheduling.groups.change import task_group_change
from scheduling.groups.crash_loop import crash_loop
from scheduling.groups.endpoints import autoscale_samples, group_endpoints, group_revisions, group_timeline
from scheduling.groups.replica_state import member_ready, ready_replica_count
from scheduling.groups.stop import task_group_stop
from scheduling.groups.submit import task_group_submit
from scheduling.models import Parallelism, TaskGroup, TaskType
from scheduling.selectors import group_members, groups_visible_to
from scheduling.web.charts import autoscale_chart
from scheduling.web.forms import STOP_FORM_FIELDS, error_context, stop_payload, submitted
from scheduling.web.pool_form import POOL_FORM_FIELDS, pool_payload
from tenants.models import Tenant

GROUP_FORM_FIELDS = ("tenant", "name", "type", "world_size", "gpus_per_worker", "gpu_type", "parallelism",
                     "replicas", "nodes_per_replica", "priority", "max_restarts", "image", "command",
                     *POOL_FORM_FIELDS, *STOP_FORM_FIELDS)
# The group's final states: its page stops polling.
_SETTLED = {TaskGroup.Status.SUCCEEDED, TaskGroup.Status.FAILED, TaskGroup.Status.STOPPED}


def _form_payload(post, *, admin: bool) -> dict:
    """The form as an API body: empty inputs are left out so that the API's defaults apply."""
    payload = {name: post.get(name, "").strip() for name in GROUP_FORM_FIELDS
               if name not in ("tenant", *POOL_FORM_FIELDS, *STOP_FORM_FIELDS) and post.get(name, "").strip() != ""}
    payload.update(pool_payload(post))
    payload.update(stop_payload(post))
    if admin:
        payload["tenant"] = post.get("tenant", "").strip() or None
    return payload


def _submit_group(request, *, admin: bool):
    payload = TaskGroupInput(data=_form_payload(request.POST, admin=admin), context=FORM_TEXT)
    payload.is_valid(raise_exception=True)
    return task_group_submit(user=request.user, fields=payload.validated_data)


@login_required
def group_new(request):
    admin = is_admin(request.user)
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        group, errors = submitted(lambda: _submit_group(request, admin=admin))
        if group is not None:
            messages.success(request, f"Group “{group.name}” submitted.")
            return redirect("group-detail", group_id=group.id)
    context = {
        **error_context(errors, GROUP_FORM_FIELDS),
        "values": request.POST if request.method == "POST" else {},
        "admin": admin,
        "tenants": Tenant.objects.filter(status=Tenant.Status.ACTIVE) if admin else [],
        "gpu_types": GPU_TYPES,
        "parallelisms": Parallelism.values,
    }
    return render_page(request, "scheduling/group_new.html", context, status=400 if errors else 200)


# The lifecycle forms of an inference group's page (design §17.2) and the fields each shows errors beside.
SCALE_FORM_FIELDS = ("replicas",)
UPDATE_FORM_FIELDS = ("image", "command", "env")


def env_from_text(text: str) -> dict[str, str]:
    """The update form's `NAME=value` lines as an env map; a line without `=` is an error beside the field."""
    env = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if "=" not in line:
            raise ValidationError({"env": [f"line {number}: write NAME=value"]})
        name, value = line.split("=", 1)
        env[name.strip()] = value
    return env


def env_as_text(env: dict[str, str]) -> str:
    return "\n".join(f"{name}={value}" for name, value in env.items())


def _change(request, group: TaskGroup, action: str) -> TaskGroup:
    if action == "stop":
        return task_group_stop(group=group)
    if action == "scale":
        body = {"replicas": request.POST.get("replicas", "").strip()}
    else:
        body = {"image": request.POST.get("image", "").strip(), "command": request.POST.get("command", ""),
                "env": env_from_text(request.POST.get("env", ""))}
    payload = TaskGroupChangeInput(data=body, context=FORM_TEXT)
    payload.is_valid(raise_exception=True)
    return task_group_change(group=group, fields=payload.validated_data)


_DONE = {"stop": "Stop requested for every replica of “{}”.", "scale": "“{}” scaled.",
         "update": "A new revision of “{}” is rolling out."}


@login_required
def group_detail(request, group_id: int):
    group = get_object_or_404(groups_visible_to(request.user), id=group_id)
    errors: dict[str, list[str]] = {}
    action = request.POST.get("action", "") if request.method == "POST" else ""
    if action in _DONE:
        changed, errors = submitted(lambda: _change(request, group, action))
        if changed is not None:
            messages.success(request, _DONE[action].format(group.name))
            return redirect("group-detail", group_id=group.id)
        group.refresh_from_db()
    loop = crash_loop(group) if group.type == TaskType.INFERENCE else None
    now = timezone.now()
    members = group_members(group)
    service = group.type == TaskType.INFERENCE
    context = {
        "group": group, "members": members,
        "settled": group.status in _SETTLED and (not service or group.stopped_at is not None),
        "crash_loop": loop, "backing_off": loop is not None and loop.holds_at(timezone.now()),
        "service": service, "ready_count": ready_replica_count(group, members),
        "ready_ids": {task.id for task in members if member_ready(group, task)},
        "multi_node": group.nodes_per_replica > 1,
        "endpoints": group_endpoints(group) if service else [],
        "revisions": group_revisions(group) if service else [],
        "timeline": group_timeline(group) if service else [],
        "autoscale_chart": (autoscale_chart(autoscale_samples(group, now=now), target=group.autoscale["target"],
                                            now=now) if group.autoscale else None),
        "action": action, "values": request.POST if errors else {},
        "env_text": request.POST.get("env", "") if errors and action == "update" else env_as_text(group.env),
        **error_context(errors, SCALE_FORM_FIELDS if action == "scale" else UPDATE_FORM_FIELDS),
    }
    return render_page(request, "scheduling/group_detail.html", context, fragment="group-live",
                       status=400 if errors else 200)
