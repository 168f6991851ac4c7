"""Console pages: one view per page, serving the page and, for htmx requests, its fragments."""

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from heteroflow_site.errors import DomainError
from heteroflow_site.permissions import is_admin
from heteroflow_site.serializers import flat_errors
from heteroflow_site.validation import positive_int_or_none
from heteroflow_site.web import render_page, staff_required
from nodes.models import GPU_TYPES
from nodes.selectors import capacity_by_architecture, nodes_by_status
from scheduling import lifecycle
from scheduling.api.task_input import TaskInput
from scheduling.models import TaskStatus, TaskType
from scheduling.queue.selectors import queue_state
from scheduling.selectors import pending_by_code, pending_queue, recent_cycles, tasks_visible_to
from scheduling.services.task_submit import task_submit
from scheduling.web import preemption_plan
from scheduling.visibility import filtered_nodes_for
from tenants.models import Tenant

TASK_PAGE_SIZE = 200
SCORE_MATRIX_ROWS = 10
FRAGMENTATION_SIZES = (1, 2, 4, 8)
PENDING_SHOWN = 50
ACTIVE_FILTER = "active"
FORM_FIELDS = frozenset({"tenant", "name", "type", "image", "command", "gpu_type", "gpu_required", "gpu_memory_mb",
                         "gpu_compute_percent", "cpu_cores", "memory_mb", "priority", "preemptible", "labels"})


# --- cluster at a glance --------------------------------------------------------------------------------------------

def capacity_chart(rows: list[dict], *, width: int = 620, label_width: int = 92, row_height: int = 30) -> dict:
    """Geometry of the horizontal stacked bar chart, computed here so the SVG needs no script."""
    scale_max = max((row["total"] for row in rows), default=0) or 1
    plot = width - label_width - 60
    bars = []
    for position, row in enumerate(rows):
        used_w = plot * row["used"] / scale_max
        free_w = plot * row["free"] / scale_max
        offline_w = plot * row["offline"] / scale_max
        bars.append({**row, "y": 10 + position * row_height, "used_w": used_w, "free_x": label_width + used_w,
                     "free_w": free_w, "offline_x": label_width + used_w + free_w, "offline_w": offline_w,
                     "end_x": label_width + used_w + free_w + offline_w + 8})
    return {"width": width, "height": 20 + len(rows) * row_height, "label_width": label_width, "bars": bars}


def fragmentation_panel() -> dict:
    """Free cards vs cards usable by a k-card task and fgd's fragment of the idle capacity against the recent
    tasks' shapes, with bar geometry."""
    from scheduling.diagnostics import latest_cycle_fragmentation

    figures = latest_cycle_fragmentation()
    free = figures["free_cards"]
    bars = [{"label": "Free cards", "value": free, "free": True}]
    bars += [{"label": f"{k}-card task", "value": figures["usable"][k]} for k in FRAGMENTATION_SIZES]
    fgd = figures["fgd"]
    # fgd's measure in the same units (cards): idle capacity (shards' free share included) and the part of it the
    # recent tasks' shapes could not use.
    fgd_bars = [{"label": "Idle capacity", "value": fgd["idle"], "free": True},
                {"label": "FGD fragment", "value": fgd["fragmented"], "fgd": True}]
    top = max(max(bar["value"] for bar in bars + fgd_bars), 1)
    for position, bar in enumerate(bars + fgd_bars):
        bar["y"] = 8 + position * 30 + (12 if position >= len(bars) else 0)
        bar["w"] = 210 * bar["value"] / top
        bar["end_x"] = 96 + bar["w"] + 6
    fgd_percent = 100 * fgd["fragmented"] / fgd["idle"] if fgd["idle"] else 0.0
    return {"free": free, "bars": bars, "fgd_bars": fgd_bars, "fgd": {**fgd, "percent": fgd_percent},
            "divider_y": 8 + len(bars) * 30, "height": 28 + (len(bars) + len(fgd_bars)) * 30}


@login_required
def dashboard(request):
    tasks = tasks_visible_to(request.user)
    capacity = capacity_by_architecture()
    context = {
        "capacity": capacity,
        "chart": capacity_chart(capacity),
        "totals": {key: sum(row[key] for row in capacity) for key in ("total", "used", "free", "offline")},
        "nodes_by_status": nodes_by_status(),
        "pending_by_code": pending_by_code(tasks),
        "active_tasks": tasks.filter(status__in=lifecycle.ACTIVE_STATES).count(),
        "pending_tasks": tasks.filter(status=lifecycle.PENDING).count(),
        "cycles": recent_cycles(),
        "fragmentation": fragmentation_panel(),
    }
    return render_page(request, "scheduling/dashboard.html", context)


# --- tasks -----------------------------------------------------------------------------------------------------------

def _filtered_tasks(request):
    tasks = tasks_visible_to(request.user)
    status = request.GET.get("status", "")
    if status == ACTIVE_FILTER:
        tasks = tasks.filter(status__in=lifecycle.ACTIVE_STATES)
    elif status in TaskStatus.values:
        tasks = tasks.filter(status=status)
    tenant = request.GET.get("tenant", "")
    tenant_id = positive_int_or_none(tenant)
    if is_admin(request.user) and tenant_id is not None:
        tasks = tasks.filter(tenant_id=tenant_id)
    return tasks, {"status": status, "tenant": tenant}


@login_required
def task_list(request):
    tasks, filters = _filtered_tasks(request)
    admin = is_admin(request.user)
    counts = dict(tasks_visible_to(request.user).values_list("status").annotate(n=Count("id")).order_by())
    context = {
        "tasks": tasks[:TASK_PAGE_SIZE],
        "filters": filters,
        "show_tenant": admin,
        "tenants": Tenant.objects.all() if admin else [],
        "status_choices": [(ACTIVE_FILTER, "active")] + list(TaskStatus.choices),
        "counts": [{"status": value, "count": counts.get(value, 0)} for value in TaskStatus.values],
    }
    return render_page(request, "scheduling/tasks.html", context, fragment="task-table")


def _form_payload(post, *, admin: bool) -> dict:
    """The job form as an API body: empty inputs are left out so that the API's defaults apply."""
    payload = {}
    for name in ("name", "type", "image", "command", "gpu_type", "gpu_required", "gpu_memory_mb",
                 "gpu_compute_percent", "cpu_cores", "memory_mb", "priority"):
        value = post.get(name, "").strip() if name != "command" else post.get(name, "")
        if value != "" or name in ("name", "gpu_type"):
            payload[name] = value
    payload["preemptible"] = post.get("preemptible") == "on"
    labels = {}
    for key, value in zip(post.getlist("label_key"), post.getlist("label_value")):
        if key.strip() or value.strip():
            labels[key.strip()] = value
    payload["labels"] = labels
    if admin:
        payload["tenant"] = post.get("tenant", "").strip() or None
    return payload


def _error_map(error: Exception) -> dict[str, list[str]]:
    """Errors by form field; what lies below a field (a label's key) is named in the message."""
    if isinstance(error, DomainError):
        return {error.field or "__all__": [error.message]}
    detail = error.detail if isinstance(error.detail, dict) else {"__all__": error.detail}
    errors: dict[str, list[str]] = {}
    for path, texts in flat_errors(detail).items():
        field, below = re.match(r"([^.\[]*)\.?(.*)", path).groups()
        errors.setdefault(field, []).extend(f"{below}: {text}" if below else text for text in texts)
    return errors


def submitted(create):
    """Run a form's submission: (what it created, {}) or, refused, (None, the errors by field)."""
    try:
        return create(), {}
    except (ValidationError, DomainError) as error:
        return None, _error_map(error)


def error_context(errors: dict[str, list[str]], form_fields) -> dict:
    """A refused submission for its form: errors beside the fields the form has, the others above it."""
    return {
        "errors": errors,
        "field_errors": {field: texts for field, texts in errors.items() if field in form_fields},
        "form_errors": [text if field == "__all__" else f"{field}: {text}"
                        for field, texts in errors.items() if field not in form_fields for text in texts],
    }


def _submit_task(request, *, admin: bool):
    payload = TaskInput(data=_form_payload(request.POST, admin=admin))
    payload.is_valid(raise_exception=True)
    return task_submit(user=request.user, fields=payload.validated_data)


@login_required
def task_new(request):
    admin = is_admin(request.user)
    errors: dict[str, list[str]] = {}
    values = request.POST if request.method == "POST" else {}
    if request.method == "POST":
        task, errors = submitted(lambda: _submit_task(request, admin=admin))
        if task is not None:
            messages.success(request, f"Task “{task.name}” submitted.")
            return redirect("task-detail", task_id=task.id)
    labels = list(zip(request.POST.getlist("label_key"), request.POST.getlist("label_value"))) if values else []
    context = {
        **error_context(errors, FORM_FIELDS),
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
    from scheduling.services.task_stop import task_stop

    task = get_object_or_404(tasks_visible_to(request.user).select_related("nominated_node"), id=task_id)
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
        panel = preemption_plan.preemption_plan_panel(task_id=task.id, user=request.user) if pending else None
        return render_page(request, preemption_plan.TEMPLATE, {"task": task, "preemption": panel},
                           fragment=preemption_plan.FRAGMENT)
    context = {
        "task": task,
        "preemption": preemption_plan.preemption_plan_panel(task_id=task.id, user=request.user) if pending else None,
        "events": task.events.all(),
        "why": why_pending(getattr(task, "attempt", None), admin=is_admin(request.user)),
        "queue": queue_state(task),
        "stoppable": task.status in (lifecycle.PENDING, lifecycle.SCHEDULED, lifecycle.RUNNING),
        "terminal": task.status in lifecycle.TERMINAL_STATES,
        "show_tenant": is_admin(request.user),
    }
    return render_page(request, "scheduling/task_detail.html", context, fragment="task-live")


# --- diagnostics -----------------------------------------------------------------------------------------------------

@staff_required
def diagnostics(request):
    from scheduling.diagnostics import attempt_counts

    ran = None
    if request.method == "POST":
        from scheduling.cycle import run_cycle

        ran = run_cycle()
        if not request.htmx:
            messages.success(request, "Cycle finished.")
            return redirect("diagnostics")
    now = timezone.now()
    context = {
        "cycles": recent_cycles(),
        "ran": ran,
        "attempt_counts": attempt_counts(),
        "pending": [{"task": task, "queue": queue_state(task, now=now)}
                    for task in pending_queue(limit=PENDING_SHOWN)],
        "fragmentation": fragmentation_panel(),
        "target_workload": target_workload_rows(),
    }
    return render_page(request, "scheduling/diagnostics.html", context, fragment="recent-cycles")


def target_workload_rows() -> dict:
    """fgd's target workload as the scheduler sees it: the recent-task window's most common shapes."""
    from scheduling.plugins.fgd.recent import WINDOW, recent_workload

    workload = recent_workload()
    return {"window": WINDOW, "counted": workload.counted,
            "shapes": [{"label": shape.label(), "percent": 100 * share}
                       for shape, share in zip(workload.shapes, workload.popularity)]}
