import django_filters
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling.api.task_input import TaskInput
from scheduling.models import Task, TaskStatus
from scheduling.selectors import tasks_visible_to
from scheduling.services.task_stop import task_stop
from scheduling.services.task_submit import task_submit


class TaskOutput(serializers.ModelSerializer):
    tenant = serializers.IntegerField(source="tenant_id")
    node = serializers.SerializerMethodField()
    group = serializers.IntegerField(source="group_id", allow_null=True)
    diagnostics = serializers.SerializerMethodField()

    class Meta:
        model = Task
        fields = [
            "id", "tenant", "name", "type", "image", "command", "gpu_type", "gpu_required", "gpu_memory_mb",
            "gpu_compute_percent", "cpu_cores", "memory_mb", "priority", "preemptible", "labels", "group", "rank",
            "status", "reason", "node", "gpus", "port", "shard", "preempt_count", "created_at", "scheduled_at",
            "started_at", "finished_at", "diagnostics",
        ]

    def get_node(self, task: Task) -> str | None:
        return task.node.name if task.node_id else None

    def get_diagnostics(self, task: Task) -> dict | None:
        attempt = getattr(task, "attempt", None)
        if attempt is None:
            return None
        return {"code": attempt.code, "message": attempt.message, "nodes": attempt.node_entries(), **attempt.extra}


class TaskFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=TaskStatus.choices)
    tenant = django_filters.NumberFilter(field_name="tenant_id")
    node = django_filters.CharFilter(method="filter_node")

    class Meta:
        model = Task
        fields = ["status", "tenant", "node"]

    def filter_node(self, queryset, name, value):
        if value.isdigit():
            return queryset.filter(node_id=int(value))
        return queryset.filter(node__name=value)


class TaskListCreateApi(APIView):
    @extend_schema(responses=TaskOutput(many=True))
    def get(self, request):
        tasks = TaskFilter(request.query_params, queryset=tasks_visible_to(request.user))
        if not tasks.is_valid():
            return Response(tasks.errors, status=status.HTTP_400_BAD_REQUEST)
        return Response(TaskOutput(tasks.qs[:500], many=True).data)

    @extend_schema(request=TaskInput, responses={201: TaskOutput})
    def post(self, request):
        payload = TaskInput(data=request.data)
        payload.is_valid(raise_exception=True)
        task = task_submit(user=request.user, fields=payload.validated_data)
        task = tasks_visible_to(request.user).get(id=task.id)
        return Response(TaskOutput(task).data, status=status.HTTP_201_CREATED)


class TaskDetailApi(APIView):
    @extend_schema(responses=TaskOutput)
    def get(self, request, task_id: int):
        task = get_object_or_404(tasks_visible_to(request.user), id=task_id)
        return Response(TaskOutput(task).data)


class TaskStopApi(APIView):
    @extend_schema(request=None, responses=TaskOutput)
    def post(self, request, task_id: int):
        task = get_object_or_404(tasks_visible_to(request.user), id=task_id)
        task = task_stop(task=task)
        return Response(TaskOutput(tasks_visible_to(request.user).get(id=task.id)).data)
