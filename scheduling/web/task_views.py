"""Task pages: the list, the submission form and a task's page (with why it is pending)."""

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from rest_framework import serializers

from heteroflow_site.errors import Conflict, DomainError
from heteroflow_site.permissions import is_admin
from heteroflow_site.serializers import FORM_TEXT
from heteroflow_site.validation import NameField, positive_int_or_none
from heteroflow_site.web import render_page
from nodes.models import GPU_TYPES
from scheduling import lifecycle
from scheduling.api.task_input import TaskInput
from scheduling.api.template_apis import TemplateFieldsInput, template_fields
from scheduling.diagnostics.submission_warnings import submission_warnings
from scheduling.diagnostics.visibility import filtered_nodes_for
from scheduling.models import TaskStatus, TaskTemplate, TaskType
from scheduling.queue.positions import queue_positions
from scheduling.queue.selectors import queue_state
from scheduling.selectors import task_list_visible_to, tasks_visible_to, templates_visible_to
from scheduling.services.task_resubmit import task_resubmit
from scheduling.services.task_stop import task_stop
from scheduling.services.task_submit import submitting_tenant, task_submit
from scheduling.services.task_templates import task_template_create
from scheduling.web import preemption_plan
from scheduling.web.forms import TASK_FORM_FIELDS, TASK_FORM_INPUTS, error_context, submitted, task_form_payload
from tenants.models import Tenant

TASK_PAGE_SIZE = 100
# The list's sorts: a column's name, `-name` descending. Ties fall back to the newest first.
TASK_SORTS = {"name": ("name",), "tenant": ("tenant__name",), "status": ("status",), "node": ("node__name",),
              "priority": ("priority",), "submitted": ("created_at",)}
DEFAULT_TASK_SORT = "-submitted"
SCORE_MATRIX_ROWS = 10
ACTIVE_FILTER = "active"


def _filtered_tasks(request):
    tasks = task_list_visible_to(request.user)
    status = request.GET.get("status", "")
    if status == ACTIVE_FILTER:
        tasks = tasks.filter(status__in=lifecycle.ACTIVE_STATES)
    elif status in TaskStatus.values:
        tasks = tasks.filter(status=status)
    tenant = request.GET.get("tenant", "")
    tenant_id = positive_int_or_none(tenant)
    if is_admin(request.user) and tenant_id is not None:
        tasks = tasks.filter(tenant_id=tenant_id)
    query = request.GET.get("q", "").strip()
    if query:
        words = Q(name__icontains=query) | Q(node__name__icontains=query) | Q(status=query.lower())
        if is_admin(request.user):
            words |= Q(tenant__name__icontains=query)
        if query.lstrip("#").isdigit():
            words |= Q(id=int(query.lstrip("#")))
        tasks = tasks.filter(words)
    sort = request.GET.get("sort", "")
    if sort.lstrip("-") not in TASK_SORTS:
        sort = DEFAULT_TASK_SORT
    direction = "-" if sort.startswith("-") else ""
    columns = TASK_SORTS[sort.lstrip("-")]
    tasks = tasks.order_by(*(direction + column for column in columns), f"{direction}id")
    return tasks, {"status": status, "tenant": tenant, "q": query, "sort": sort}


def _sort_links(current: str) -> dict[str, dict]:
    """Each column's header link: ascending first, the other way when it is the current sort."""
    links = {}
    for column in TASK_SORTS:
        ascending = column != "submitted"
        if current.lstrip("-") == column:
            ascending = current.startswith("-")
        links[column] = {"sort": column if ascending else f"-{column}",
                         "mark": ("▲" if not current.startswith("-") else "▼") if current.lstrip("-") == column
                         else ""}
    return links


@login_required
def task_list(request):
    tasks, filters = _filtered_tasks(request)
    admin = is_admin(request.user)
    counts = dict(tasks_visible_to(request.user).values_list("status").annotate(n=Count("id")).order_by())
    page = Paginator(tasks, TASK_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "tasks": page.object_list,
        "page": page,
        "page_query": urlencode({name: value for name, value in filters.items() if value}),
        "filter_query": urlencode({name: value for name, value in filters.items() if value and name != "sort"}),
        "sorts": _sort_links(filters["sort"]),
        "active_states": lifecycle.ACTIVE_STATES,
        "filters": filters,
        "show_tenant": admin,
        "tenants": Tenant.objects.all() if admin else [],
        "status_choices": [(ACTIVE_FILTER, "active")] + list(TaskStatus.choices),
        "counts": [{"status": value, "count": counts.get(value, 0)} for value in TaskStatus.values],
    }
    return render_page(request, "scheduling/tasks.html", context, fragment="task-table")


def _submit_task(request, *, admin: bool):
    payload = TaskInput(data=task_form_payload(request.POST, admin=admin), context=FORM_TEXT)
    payload.is_valid(raise_exception=True)
    return task_submit(user=request.user, fields=payload.validated_data)


class _TemplateNameInput(serializers.Serializer):
    template_name = NameField()


def _save_template(request, *, admin: bool) -> TaskTemplate:
    """The form's fields as a template of the tenant's (nothing submitted): errors beside the fields, the name's
    beside "Template name"."""
    payload = task_form_payload(request.POST, admin=admin)
    tenant_id = payload.pop("tenant", None)
    payload.pop("deadline", None)
    if not payload.get("name"):
        payload.pop("name", None)
    name = _TemplateNameInput(data={"template_name": request.POST.get("template_name", "").strip()},
                              context=FORM_TEXT)
    name.is_valid(raise_exception=True)
    fields = TemplateFieldsInput(data=payload, context=FORM_TEXT)
    fields.is_valid(raise_exception=True)
    tenant = submitting_tenant(user=request.user, tenant_id=positive_int_or_none(tenant_id or ""))
    try:
        return task_template_create(tenant=tenant, name=name.validated_data["template_name"],
                                    fields=template_fields(fields.validated_data))
    except Conflict as taken:
        raise Conflict(taken.message, field="template_name") from None


def _template_values(template: TaskTemplate) -> tuple[dict, list[tuple[str, str]]]:
    """A template as the form's values and label rows."""
    fields = template.fields
    values = {name: str(fields[name]) for name in TASK_FORM_INPUTS if fields.get(name) is not None}
    values["preemptible"] = bool(fields.get("preemptible"))
    return values, list((fields.get("labels") or {}).items())


@login_required
def task_new(request):
    admin = is_admin(request.user)
    errors: dict[str, list[str]] = {}
    values = request.POST if request.method == "POST" else {}
    labels: list[tuple[str, str]] = []
    templates = templates_visible_to(request.user)
    if request.method == "GET" and "template" in request.GET:
        values, labels = _template_values(
            get_object_or_404(templates, id=positive_int_or_none(request.GET["template"]) or 0))
    if request.method == "POST" and request.POST.get("action") == "save_template":
        template, errors = submitted(lambda: _save_template(request, admin=admin))
        if template is not None:
            messages.success(request, f"Template “{template.name}” saved: submit from it with "
                                      f"hf submit --template {template.name}, or pick it here.")
            return redirect(f"{reverse('task-new')}?template={template.id}")
    elif request.method == "POST":
        task, errors = submitted(lambda: _submit_task(request, admin=admin))
        if task is not None:
            messages.success(request, f"Task “{task.name}” submitted.")
            for warning in submission_warnings(tenant_id=task.tenant_id, gpu_type=task.gpu_type,
                                               gpu_required=task.gpu_required, gpu_memory_mb=task.gpu_memory_mb,
                                               cpu_cores=task.cpu_cores, memory_mb=task.memory_mb):
                messages.warning(request, f"{warning['code']}: {warning['message']}")
            return redirect("task-detail", task_id=task.id)
    if request.method == "POST":
        labels = list(zip(request.POST.getlist("label_key"), request.POST.getlist("label_value")))
    context = {
        **error_context(errors, TASK_FORM_FIELDS | {"template_name"}),
        "templates": templates,
        "values": values,
        "labels": [pair for pair in labels if pair[0] or pair[1]] or [("", "")],
        "admin": admin,
        "tenants": Tenant.objects.filter(status=Tenant.Status.ACTIVE) if admin else [],
        "task_types": TaskType.values,
        "gpu_types": GPU_TYPES,
    }
    return render_page(request, "scheduling/task_new.html", context, status=400 if errors else 200)


def why_pending(attempt, *, admin: bool) -> dict | None:
    """The attempt as the task page shows it: filtered nodes grouped by reason and the best nodes' score matrix.

    A tenant sees how many nodes are dedicated to other tenants, not which."""
    if attempt is None:
        return None
    filtered = filtered_nodes_for(attempt.nodes.get("filtered", {}), admin=admin)
    plugins = attempt.nodes.get("plugins", [])
    scored = attempt.nodes.get("scored", [])
    return {
        "code": attempt.code,
        "message": attempt.message,
        "at": attempt.at,
        "groups": sorted(({"reason": reason, "count": names if isinstance(names, int) else len(names),
                           "names": [] if isinstance(names, int) else names}
                          for reason, names in filtered.items()), key=lambda group: -group["count"]),
        "plugins": plugins,
        "matrix": [{"node": node, "total": total, "scores": scores}
                   for node, total, *scores in scored[:SCORE_MATRIX_ROWS]],
        "feasible_count": len(scored),
    }


@login_required
def task_detail(request, task_id: int):
    task = get_object_or_404(tasks_visible_to(request.user).select_related("nominated_node"), id=task_id)
    if request.method == "POST" and request.POST.get("action") == "resubmit":
        try:
            created = task_resubmit(task=task)
        except DomainError as error:
            messages.error(request, error.message)
            return redirect("task-detail", task_id=task.id)
        messages.success(request, f"Resubmitted as task #{created.id}.")
        return redirect("task-detail", task_id=created.id)
    if request.method == "POST":
        try:
            task_stop(task=task)
        except DomainError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, f"Stop requested for “{task.name}”.")
        return redirect("task-detail", task_id=task.id)
    pending = task.status == lifecycle.PENDING
    if request.htmx and request.htmx.target == preemption_plan.FRAGMENT:
        panel = preemption_plan.panel_within_budget(request, task=task) if pending else None
        return render_page(request, preemption_plan.TEMPLATE, {"task": task, "preemption": panel},
                           fragment=preemption_plan.FRAGMENT)
    context = {
        "task": task,
        # Planned for the full page and the panel's own 15 s refresh only, never for the 3 s live fragment (which
        # does not show it): each plan reads the whole cluster.
        "preemption": (preemption_plan.panel_within_budget(request, task=task)
                       if pending and not request.htmx else None),
        "events": task.events.all(),
        "why": why_pending(getattr(task, "attempt", None), admin=is_admin(request.user)),
        "queue": queue_state(task),
        "position": queue_positions([task.id]).get(task.id) if pending else None,
        "stoppable": task.status in (lifecycle.PENDING, lifecycle.SCHEDULED, lifecycle.RUNNING),
        "terminal": task.status in lifecycle.TERMINAL_STATES,
        "show_tenant": is_admin(request.user),
    }
    return render_page(request, "scheduling/task_detail.html", context, fragment="task-live")
