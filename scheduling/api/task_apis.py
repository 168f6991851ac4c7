from collections.abc import Callable, Iterable
from functools import cache

import django_filters
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.pagination import PAGE_HEADERS, PAGE_PARAMETERS, LinkHeaderPagination
from heteroflow_site.permissions import is_admin
from heteroflow_site.validation import positive_int_or_none
from scheduling.api.task_input import TaskInput
from scheduling.models import Task, TaskStatus
from scheduling.queue.positions import queue_positions
from scheduling.selectors import tasks_visible_to
from scheduling.services.task_resubmit import task_resubmit
from scheduling.services.task_stop import task_stop
from scheduling.services.task_submit import task_submit
from scheduling.diagnostics.submission_warnings import submission_warnings
from scheduling.diagnostics.visibility import attempt_diagnostics
from tenants.selectors import tenant_of


class TaskOutput(serializers.ModelSerializer):
    tenant = serializers.IntegerField(source="tenant_id")
    node = serializers.SerializerMethodField()
    group = serializers.IntegerField(source="group_id", allow_null=True)
    env = serializers.DictField(source="submitted_env", child=serializers.CharField(),
                                help_text="The variables the submitter gave (design §17.2)")
    diagnostics = serializers.SerializerMethodField(
        help_text="The latest scheduling attempt, null before the first: `{code, message, nodes: [{node, reason, "
                  "scores, total}], …}`; in a list `{code, message}` only unless `diagnostics=full` is asked for.")
    queue_position = serializers.SerializerMethodField(
        help_text="A pending task's place (1 = next) among the pending work of its GPU type, in the queue order in "
                  "force, as of the last scheduling cycle; null when not pending or not yet seen by a cycle.")

    class Meta:
        model = Task
        fields = [
            "id", "tenant", "name", "type", "image", "command", "gpu_type", "gpu_required", "gpu_memory_mb",
            "gpu_compute_percent", "cpu_cores", "memory_mb", "priority", "preemptible", "labels", "tolerations",
            "node_selector", "env", "group", "rank", "status", "reason", "node", "gpus", "port", "shard", "borrowed",
            "preempt_count", "reserved_at", "deadline", "timeout_seconds", "termination_grace_seconds", "created_at",
            "scheduled_at", "started_at", "finished_at", "diagnostics", "queue_position",
        ]

    def get_node(self, task: Task) -> str | None:
        return task.node.name if task.node_id else None

    @extend_schema_field({"type": ["integer", "null"], "minimum": 1})
    def get_queue_position(self, task: Task) -> int | None:
        if task.status != TaskStatus.PENDING:
            return None
        positions = self.context.get("queue_positions")
        if positions is None:
            positions = queue_positions([task.id])
        return positions.get(task.id, (None,))[0]

    def get_diagnostics(self, task: Task) -> dict | None:
        attempt = getattr(task, "attempt", None)
        if attempt is None:
            return None
        # Without a viewer in the context, the tenant's view: nothing of other tenants.
        return attempt_diagnostics(attempt, tenant_id=self.context.get("viewer_tenant_id", task.tenant_id))


class SubmissionWarning(serializers.Serializer):
    code = serializers.CharField(help_text="`NeverFits`: no registered node of the task's type could ever hold it")
    message = serializers.CharField(help_text="why, the largest node's figures, and the way out")


class TaskCreatedOutput(TaskOutput):
    """The schema of `created_task_output`."""

    warnings = SubmissionWarning(many=True, read_only=True)

    class Meta(TaskOutput.Meta):
        fields = [*TaskOutput.Meta.fields, "warnings"]


def _datetime(value) -> str:
    # DRF's DateTimeField: the current time zone, ISO 8601 with UTC written as `Z`.
    text = timezone.localtime(value).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _identity(value):
    return value


# What DRF's field does to a value that is not None, for the field classes TaskOutput has, without its per-field
# attribute lookups; any other field class goes through its own to_representation.
_FAST_REPRESENTATIONS: dict[type, Callable] = {
    serializers.IntegerField: int,
    serializers.FloatField: float,
    serializers.CharField: str,
    serializers.ChoiceField: str,
    serializers.BooleanField: bool,
    serializers.JSONField: _identity,
    serializers.DateTimeField: _datetime,
}
# The columns of TaskOutput's method fields: the node's name, and whether the task has an attempt, its code and
# message (the diagnostics summary).
_METHOD_COLUMNS = {"node": "node__name", "diagnostics": "attempt__id", "queue_position": "id"}
_ATTEMPT_SUMMARY = ("attempt__code", "attempt__message")


@cache
def _summary_columns() -> tuple[tuple[str, ...], tuple[tuple[str, int, Callable], ...]]:
    """The columns a summary row reads, and per output field (in TaskOutput's order) its name, its column's index
    and its representation; derived once per process from TaskOutput's fields, so that both keep the same shape."""
    columns: list[str] = []
    fields = []
    for name, field in TaskOutput().fields.items():
        if isinstance(field, serializers.SerializerMethodField):
            if name not in _METHOD_COLUMNS:
                raise TypeError(f"TaskOutput.{name} has no summary-row representation")
            column, represent = _METHOD_COLUMNS[name], _identity
        else:
            column, represent = field.source, _FAST_REPRESENTATIONS.get(type(field), field.to_representation)
        fields.append((name, len(columns), represent))
        columns.append(column)
    return (*columns, *_ATTEMPT_SUMMARY), tuple(fields)


def task_summary_rows(tasks: QuerySet[Task]) -> QuerySet:
    """`tasks` as the tuples `task_summaries` turns into TaskOutput's list representation: a list of 100 tasks
    built model instances (a task, its tenant, node and attempt each) and ran DRF's per-field machinery over 36
    fields each, about two thirds of the request's time."""
    return tasks.values_list(*_summary_columns()[0])


# The columns of relations (its node, its attempt) a task just created does not have yet.
_NOT_YET_CREATED = ("node__", "attempt__")


def created_task_output(task: Task) -> dict:
    """TaskCreatedOutput's representation of a task its request has just created, from the instance in hand: a new
    task is pending, on no node and never attempted, so reading it back and DRF's per-field machinery were a fifth of
    a submit's time for nothing the instance lacks."""
    row = tuple(None if column.startswith(_NOT_YET_CREATED) else getattr(task, column)
                for column in _summary_columns()[0])
    warnings = submission_warnings(
        tenant_id=task.tenant_id, gpu_type=task.gpu_type, gpu_required=task.gpu_required,
        gpu_memory_mb=task.gpu_memory_mb, cpu_cores=task.cpu_cores, memory_mb=task.memory_mb)
    return {**task_summaries([row])[0], "warnings": warnings}


def task_summaries(rows: Iterable[tuple]) -> list[dict]:
    """TaskOutput's representation of `task_summary_rows`, the diagnostics as their summary: {code, message}."""
    columns, fields = _summary_columns()
    code, message = len(columns) - 2, len(columns) - 1
    rows = list(rows)
    status_index = columns.index("status")
    positions = queue_positions([row[columns.index("id")] for row in rows if row[status_index] == TaskStatus.PENDING])
    summaries = []
    for row in rows:
        summary = {name: None if row[index] is None else represent(row[index]) for name, index, represent in fields}
        # In place of the attempt's id, which said whether there is one.
        if summary["diagnostics"] is not None:
            summary["diagnostics"] = {"code": row[code], "message": row[message]}
        # In place of the task's id: its published position.
        summary["queue_position"] = positions.get(summary["id"], (None,))[0]
        summaries.append(summary)
    return summaries


class TaskFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=TaskStatus.choices)
    tenant = django_filters.NumberFilter(field_name="tenant_id")
    node = django_filters.CharFilter(method="filter_node")

    class Meta:
        model = Task
        fields = ["status", "tenant", "node"]

    def filter_node(self, queryset, name, value):
        node_id = positive_int_or_none(value)
        if node_id is not None:
            return queryset.filter(node_id=node_id)
        return queryset.filter(node__name=value)


def output_context(request) -> dict:
    """Admins read every diagnostic in full (viewer_tenant_id None); tenant users their tenant's view."""
    return {"viewer_tenant_id": None if is_admin(request.user) else getattr(tenant_of(request.user), "id", -1)}


SUMMARY, FULL = "summary", "full"


class TaskListInput(serializers.Serializer):
    # A task's full diagnostics name up to 250 nodes (design §14), some 20 KB a task: a list of 100 would be 2 MB,
    # read, decoded and re-encoded on every poll. A list carries the code and the one-line summary; the task itself
    # (or `diagnostics=full`) the per-node entries.
    diagnostics = serializers.ChoiceField(choices=[SUMMARY, FULL], default=SUMMARY)


TASK_FILTER_PARAMETERS = [
    OpenApiParameter("status", enum=TaskStatus.values),
    OpenApiParameter("tenant", {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
                     description="tenant id (admins; a tenant user sees only its own)"),
    OpenApiParameter("node", str, description="node id or name"),
    OpenApiParameter("diagnostics", enum=[SUMMARY, FULL],
                     description="`summary` (the default): each task's diagnostics are its latest attempt's code and "
                                 "message only; `full`: with the per-node entries, as `GET /api/v1/tasks/{id}` has "
                                 "them"),
]


class TaskListCreateApi(APIView):
    @extend_schema(parameters=[*TASK_FILTER_PARAMETERS, *PAGE_PARAMETERS, *PAGE_HEADERS],
                   responses=TaskOutput(many=True))
    def get(self, request):
        """Newest first, a page at a time (`limit`, `offset`; the `Link` header names the next page)."""
        options = TaskListInput(data={key: request.query_params[key] for key in TaskListInput().fields
                                      if key in request.query_params})
        options.is_valid(raise_exception=True)
        diagnostics = options.validated_data["diagnostics"]
        tasks = TaskFilter(request.query_params, queryset=tasks_visible_to(request.user))
        if not tasks.is_valid():
            raise serializers.ValidationError(tasks.errors)
        paginator = LinkHeaderPagination()
        if diagnostics == SUMMARY:
            rows = paginator.paginate_queryset(task_summary_rows(tasks.qs), request, view=self)
            return paginator.get_paginated_response(task_summaries(rows))
        page = paginator.paginate_queryset(tasks.qs, request, view=self)
        context = {**output_context(request),
                   "queue_positions": queue_positions(task.id for task in page if task.status == TaskStatus.PENDING)}
        return paginator.get_paginated_response(TaskOutput(page, many=True, context=context).data)

    @extend_schema(request=TaskInput, responses={201: TaskCreatedOutput})
    def post(self, request):
        """The task as created, with `warnings` a submitter should read at once (work no node could ever hold)."""
        payload = TaskInput(data=request.data)
        payload.is_valid(raise_exception=True)
        task = task_submit(user=request.user, fields=payload.validated_data)
        return Response(created_task_output(task), status=status.HTTP_201_CREATED)


class TaskDetailApi(APIView):
    @extend_schema(responses=TaskOutput)
    def get(self, request, task_id: int):
        task = get_object_or_404(tasks_visible_to(request.user), id=task_id)
        return Response(TaskOutput(task, context=output_context(request)).data)


class TaskResubmitApi(APIView):
    @extend_schema(request=None, responses={201: TaskCreatedOutput})
    def post(self, request, task_id: int):
        """A finished task submitted again with the fields it was submitted with (409 while it is active)."""
        task = get_object_or_404(tasks_visible_to(request.user), id=task_id)
        return Response(created_task_output(task_resubmit(task=task)), status=status.HTTP_201_CREATED)


class TaskStopApi(APIView):
    @extend_schema(request=None, responses=TaskOutput)
    def post(self, request, task_id: int):
        task = get_object_or_404(tasks_visible_to(request.user), id=task_id)
        task = task_stop(task=task)
        task = tasks_visible_to(request.user).get(id=task.id)
        return Response(TaskOutput(task, context=output_context(request)).data)
