from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling.api.group_input import TaskGroupInput
from scheduling.api.task_apis import SubmissionWarning
from scheduling.diagnostics.submission_warnings import submission_warnings
from scheduling.models import TaskGroup
from heteroflow_site.pagination import PAGE_HEADERS, PAGE_PARAMETERS, LinkHeaderPagination
from scheduling.selectors import group_list_visible_to, group_members, groups_visible_to
from scheduling.groups.submit import task_group_submit


class TaskGroupOutput(serializers.ModelSerializer):
    tenant = serializers.IntegerField(source="tenant_id")
    members = serializers.SerializerMethodField()
    diagnostics = serializers.SerializerMethodField()

    class Meta:
        model = TaskGroup
        fields = ["id", "tenant", "name", "type", "status", "world_size", "gpus_per_worker", "gpu_type", "parallelism",
                  "replicas", "window", "window_applied", "max_restarts", "restarts", "master_addr", "backend",
                  "tolerations", "node_selector", "labels", "timeout_seconds", "termination_grace_seconds",
                  "created_at", "members", "diagnostics"]

    def get_members(self, group: TaskGroup) -> list[dict]:
        return [
            {"task": task.id, "rank": task.rank, "status": task.status,
             "node": task.node.name if task.node_id else None, "gpus": task.gpus,
             "master_addr": group.master_addr or None, "backend": group.backend or None}
            for task in group_members(group)
        ]

    def get_diagnostics(self, group: TaskGroup) -> dict | None:
        return group.diagnostics or None


class TaskGroupCreatedOutput(TaskGroupOutput):
    warnings = serializers.SerializerMethodField()

    class Meta(TaskGroupOutput.Meta):
        fields = [*TaskGroupOutput.Meta.fields, "warnings"]

    @extend_schema_field(SubmissionWarning(many=True))
    def get_warnings(self, group: TaskGroup) -> list[dict]:
        """Of one member: a gang's members are placed one to a node's worth of cards each."""
        return submission_warnings(tenant_id=group.tenant_id, gpu_type=group.gpu_type,
                                   gpu_required=group.gpus_per_worker, gpu_memory_mb=0, cpu_cores=0, memory_mb=0)


class TaskGroupListCreateApi(APIView):
    @extend_schema(parameters=[*PAGE_PARAMETERS, *PAGE_HEADERS], responses=TaskGroupOutput(many=True))
    def get(self, request):
        """Newest first, a page at a time (`limit`, `offset`; the `Link` header names the next page), each group's
        members read for the whole page at once."""
        paginator = LinkHeaderPagination()
        page = paginator.paginate_queryset(group_list_visible_to(request.user), request, view=self)
        return paginator.get_paginated_response(TaskGroupOutput(page, many=True).data)

    @extend_schema(request=TaskGroupInput, responses={201: TaskGroupCreatedOutput})
    def post(self, request):
        payload = TaskGroupInput(data=request.data)
        payload.is_valid(raise_exception=True)
        group = task_group_submit(user=request.user, fields=payload.validated_data)
        return Response(TaskGroupCreatedOutput(group).data, status=status.HTTP_201_CREATED)


class TaskGroupDetailApi(APIView):
    @extend_schema(responses=TaskGroupOutput)
    def get(self, request, group_id: int):
        group = get_object_or_404(groups_visible_to(request.user), id=group_id)
        return Response(TaskGroupOutput(group).data)
