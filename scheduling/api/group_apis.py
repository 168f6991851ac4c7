from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.serializers import StrictSerializer
from heteroflow_site.validation import (
    REPLICAS_MAX,
    WORLD_SIZE_MAX,
    ColumnIntegerField,
    CommandField,
    ImageField,
    NameField,
)
from nodes.models import GPU_TYPES
from scheduling.groups.services import task_group_create
from scheduling.models import Parallelism, TaskGroup
from scheduling.selectors import group_members, groups_visible_to
from scheduling.services.task_submit import submitting_tenant


class TaskGroupOutput(serializers.ModelSerializer):
    tenant = serializers.IntegerField(source="tenant_id")
    members = serializers.SerializerMethodField()
    diagnostics = serializers.SerializerMethodField()

    class Meta:
        model = TaskGroup
        fields = ["id", "tenant", "name", "type", "status", "world_size", "gpus_per_worker", "gpu_type", "parallelism",
                  "replicas", "window", "window_applied", "max_restarts", "restarts", "master_addr", "backend",
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


class TaskGroupListCreateApi(APIView):
    class InputSerializer(StrictSerializer):
        class WindowSerializer(serializers.Serializer):
            days = serializers.ListField(child=serializers.IntegerField(min_value=0, max_value=6), required=False)
            start = serializers.RegexField(r"^\d{2}:\d{2}$")
            end = serializers.RegexField(r"^\d{2}:\d{2}$")
            timezone = serializers.CharField(max_length=64, required=False, default="UTC")
            action = serializers.ChoiceField(choices=["pause", "scale", "stop"])
            scale_to = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX, required=False)

        name = NameField()
        type = serializers.ChoiceField(choices=["training", "inference"])
        world_size = serializers.IntegerField(min_value=1, max_value=WORLD_SIZE_MAX)
        gpus_per_worker = serializers.IntegerField(min_value=0, max_value=64)
        gpu_type = serializers.ChoiceField(choices=[""] + list(GPU_TYPES), required=False, allow_blank=True,
                                           default="")
        parallelism = serializers.ChoiceField(choices=Parallelism.choices, required=False, default=Parallelism.DATA)
        replicas = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX, required=False, allow_null=True,
                                            default=None)
        window = WindowSerializer(required=False, allow_null=True, default=None)
        image = ImageField()
        command = CommandField()
        priority = serializers.IntegerField(min_value=0, max_value=100, required=False, default=50)
        max_restarts = serializers.IntegerField(min_value=0, max_value=100, required=False, default=3)
        tenant = ColumnIntegerField(min_value=1, required=False, allow_null=True, default=None)

    @extend_schema(responses=TaskGroupOutput(many=True))
    def get(self, request):
        return Response(TaskGroupOutput(groups_visible_to(request.user)[:200], many=True).data)

    @extend_schema(request=InputSerializer, responses={201: TaskGroupOutput})
    def post(self, request):
        group = task_group_submit(user=request.user, data=request.data)
        return Response(TaskGroupOutput(group).data, status=status.HTTP_201_CREATED)


def task_group_submit(*, user, data: dict) -> TaskGroup:
    """Validate a group submission (API body or group form) and create it; raises DomainError / ValidationError."""
    payload = TaskGroupListCreateApi.InputSerializer(data=data)
    payload.is_valid(raise_exception=True)
    fields = dict(payload.validated_data)
    tenant = submitting_tenant(user=user, tenant_id=fields.pop("tenant"))
    if fields["window"] is not None:
        fields["window"] = dict(fields["window"])
    return task_group_create(tenant=tenant, **fields)


class TaskGroupDetailApi(APIView):
    @extend_schema(responses=TaskGroupOutput)
    def get(self, request, group_id: int):
        group = get_object_or_404(groups_visible_to(request.user), id=group_id)
        return Response(TaskGroupOutput(group).data)
