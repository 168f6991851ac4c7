"""Console pages: one view per page, serving the page and, for htmx requests, its fragments."""

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, Sum
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from rest_framework.exceptions import ValidationError

from heteroflow_site.errors import DomainError
from nodes.models import GPU_TYPES, Node
from scheduling import lifecycle, live
from scheduling.models import CycleRecord, Task, TaskStatus, TaskType
from scheduling.selectors import tasks_visible_to
from tenants.models import Tenant
from tenants.selectors import is_admin

RECENT_CYCLES = live.RECENT_CYCLES
TASK_PAGE_SIZE = 200
SCORE_MATRIX_ROWS = 10
FRAGMENTATION_SIZES = (1, 2, 4, 8)
NO_ATTEMPT = "not attempted yet"
ACTIVE_FILTER = "active"
FORM_FIELDS = frozenset({"tenant", "name", "type", "image", "command", "gpu_type", "gpu_required", "gpu_memory_mb",
                         "gpu_compute_percent", "cpu_cores", "memory_mb", "priority", "preemptible", "labels"})


def staff_required(view):
    """Anonymous users go to the login page; signed-in tenants get 403."""

    @login_required
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not is_admin(request.user):
            raise PermissionDenied("staff only")
        return view(request, *args, **kwargs)

    return guarded


def _render(request, template: str, context: dict, *, fragment: str | None = None):
    """The whole page, or only `fragment` (a partialdef of the same template) for htmx requests."""
    name = f"{template}#{fragment}" if fragment and request.htmx else template
    return TemplateResponse(request, name, context)


# --- cluster at a glance --------------------------------------------------------------------------------------------

def capacity_by_architecture() -> list[dict]:
    """Cards per GPU architecture: used (the ledger), free on reachable nodes, and cards on offline nodes."""
    offline = Q(status=Node.Status.OFFLINE)
    rows = (
        Node.objects.exclude(gpu_type="").values("gpu_type")
        .annotate(total=Sum("gpu_total"), used=Sum("gpu_used", filter=~offline),
                  offline=Sum("gpu_total", filter=offline), nodes=Count("id"))
        .order_by("gpu_type")
    )
    result = []
    for row in rows:
        used, offline_cards = row["used"] or 0, row["offline"] or 0
        free = max(row["total"] - used - offline_cards, 0)
        result.append({"architecture": row["gpu_type"], "total": row["total"], "used": used, "free": free,
                       "offline": offline_cards, "nodes": row["nodes"]})
    return result


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


def nodes_by_status() -> list[dict]:
    counts = dict(Node.objects.values_list("status").annotate(n=Count("id")).order_by())
    return [{"status": value, "count": counts.get(value, 0)} for value, _ in Node.Status.choices]


def pending_by_code(tasks) -> list[dict]:
    rows = (
        tasks.filter(status=lifecycle.PENDING).values("attempt__code").annotate(n=Count("id")).order_by("-n")
    )
    return [{"code": row["attempt__code"] or NO_ATTEMPT, "count": row["n"]} for row in rows]


def fragmentation_panel() -> dict:
    """Free cards vs cards usable by a k-card task (SPEC §12) and fgd's fragment of the idle capacity against the
    recent tasks' shapes (§15.9), with bar geometry."""
    from scheduling.diagnostics import fragmentation
    from scheduling.snapshot_builder import build_snapshot

    figures = fragmentation(build_snapshot())
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
        "cycles": CycleRecord.objects.all()[:RECENT_CYCLES],
        "fragmentation": fragmentation_panel(),
    }
    return TemplateResponse(request, "scheduling/dashboard.html", context)


# --- tasks -----------------------------------------------------------------------------------------------------------

def _filtered_tasks(request):
    tasks = tasks_visible_to(request.user)
    status = request.GET.get("status", "")
    if status == ACTIVE_FILTER:
        tasks = tasks.filter(status__in=lifecycle.ACTIVE_STATES)
    elif status in TaskStatus.values:
        tasks = tasks.filter(status=status)
    tenant = request.GET.get("tenant", "")
    if is_admin(request.user) and tenant.isdigit():
        tasks = tasks.filter(tenant_id=int(tenant))
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
    return _render(request, "scheduling/tasks.html", context, fragment="task-table")


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
    if isinstance(error, DomainError):
        return {error.field or "__all__": [error.message]}
    detail = error.detail
    if isinstance(detail, dict):
        return {field: _flatten(messages_) for field, messages_ in detail.items()}
    return {"__all__": _flatten(detail)}


def _flatten(detail) -> list[str]:
    if isinstance(detail, dict):
        return [f"{key}: {text}" for key, value in detail.items() for text in _flatten(value)]
    if isinstance(detail, list):
        return [text for item in detail for text in _flatten(item)]
    return [str(detail)]


@login_required
def task_new(request):
    from scheduling.apis import task_create_from_input

    admin = is_admin(request.user)
    errors: dict[str, list[str]] = {}
    values = request.POST if request.method == "POST" else {}
    if request.method == "POST":
        try:
            task = task_create_from_input(request, _form_payload(request.POST, admin=admin))
        except (ValidationError, DomainError) as error:
            errors = _error_map(error)
        else:
            messages.success(request, f"Task “{task.name}” submitted.")
            return redirect("task-detail", task_id=task.id)
    labels = list(zip(request.POST.getlist("label_key"), request.POST.getlist("label_value"))) if values else []
    context = {
        "errors": errors,
        "field_errors": {field: texts for field, texts in errors.items() if field in FORM_FIELDS},
        "form_errors": [text if field == "__all__" else f"{field}: {text}"
                        for field, texts in errors.items() if field not in FORM_FIELDS for text in texts],
        "values": values,
        "labels": [pair for pair in labels if pair[0] or pair[1]] or [("", "")],
        "admin": admin,
        "tenants": Tenant.objects.filter(status=Tenant.Status.ACTIVE) if admin else [],
        "task_types": TaskType.values,
        "gpu_types": GPU_TYPES,
    }
    return TemplateResponse(request, "scheduling/task_new.html", context, status=400 if errors else 200)


def why_pending(attempt) -> dict | None:
    """The attempt as the task page shows it: filtered nodes grouped by reason and the best nodes' score matrix."""
    if attempt is None:
        return None
    filtered = attempt.nodes.get("filtered", {})
    plugins = attempt.nodes.get("plugins", [])
    scored = attempt.nodes.get("scored", [])
    return {
        "code": attempt.code,
        "message": attempt.message,
        "at": attempt.at,
        "groups": sorted(({"reason": reason, "count": len(names), "names": names}
                          for reason, names in filtered.items()), key=lambda group: -group["count"]),
        "plugins": plugins,
        "matrix": [{"node": node, "total": total, "scores": scores}
                   for node, total, *scores in scored[:SCORE_MATRIX_ROWS]],
        "feasible_count": len(scored),
    }


@login_required
def task_detail(request, task_id: int):
    from scheduling.services.task_stop import task_stop

    task = get_object_or_404(tasks_visible_to(request.user), id=task_id)
    if request.method == "POST":
        try:
            task_stop(task=task)
        except DomainError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, f"Stop requested for “{task.name}”.")
        return redirect("task-detail", task_id=task.id)
    context = {
        "task": task,
        "events": task.events.all(),
        "why": why_pending(getattr(task, "attempt", None)),
        "stoppable": task.status in (lifecycle.PENDING, lifecycle.SCHEDULED, lifecycle.RUNNING),
        "terminal": task.status in lifecycle.TERMINAL_STATES,
        "show_tenant": is_admin(request.user),
    }
    return _render(request, "scheduling/task_detail.html", context, fragment="task-live")


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
    context = {
        "cycles": CycleRecord.objects.all()[:RECENT_CYCLES],
        "ran": ran,
        "attempt_counts": attempt_counts(),
        "pending": Task.objects.filter(status=lifecycle.PENDING).select_related("tenant", "attempt")
        .order_by("-priority", "created_at", "id")[:50],
        "fragmentation": fragmentation_panel(),
        "target_workload": target_workload_rows(),
    }
    return _render(request, "scheduling/diagnostics.html", context, fragment="recent-cycles")


def target_workload_rows() -> dict:
    """fgd's target workload as the scheduler sees it: the recent-task window's most common shapes."""
    from scheduling.plugins.fgd.recent import WINDOW, recent_workload

    workload = recent_workload()
    return {"window": WINDOW, "counted": workload.counted,
            "shapes": [{"label": shape.label(), "percent": 100 * share}
                       for shape, share in zip(workload.shapes, workload.popularity)]}
