"""Task group pages: the group form (validated like `POST /api/v1/task-groups`) and a group's page."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone

from heteroflow_site.permissions import is_admin
from heteroflow_site.serializers import FORM_TEXT
from heteroflow_site.web import render_page
from nodes.models import GPU_TYPES
from scheduling.api.group_input import TaskGroupInput
from scheduling.groups.crash_loop import crash_loop
from scheduling.models import Parallelism, TaskGroup, TaskType
from scheduling.selectors import group_members, groups_visible_to
from scheduling.groups.submit import task_group_submit
from scheduling.web.forms import STOP_FORM_FIELDS, error_context, stop_payload, submitted
from scheduling.web.pool_form import POOL_FORM_FIELDS, pool_payload
from tenants.models import Tenant

GROUP_FORM_FIELDS = ("tenant", "name", "type", "world_size", "gpus_per_worker", "gpu_type", "parallelism",
                     "replicas", "priority", "max_restarts", "image", "command", *POOL_FORM_FIELDS, *STOP_FORM_FIELDS)
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


@login_required
def group_detail(request, group_id: int):
    group = get_object_or_404(groups_visible_to(request.user), id=group_id)
    loop = crash_loop(group) if group.type == TaskType.INFERENCE else None
    context = {"group": group, "members": group_members(group), "settled": group.status in _SETTLED,
               "crash_loop": loop, "backing_off": loop is not None and loop.holds_at(timezone.now())}
    return render_page(request, "scheduling/group_detail.html", context, fragment="group-live")
