from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.api_errors import refusals
from heteroflow_site.errors import NotAllowed, TooManyPending
from heteroflow_site.pagination import PAGE_HEADERS, PAGE_PARAMETERS, LinkHeaderPagination
from scheduling.api.group_input import TaskGroupChangeInput, TaskGroupInput
from scheduling.api.task_apis import SubmissionWarning
from scheduling.diagnostics.submission_warnings import submission_warnings
from scheduling.groups.change import task_group_change
from scheduling.groups.endpoints import group_endpoints, group_revisions
from scheduling.groups.gang_bind import member_communication
from scheduling.groups.refusals import GroupStopped, NoChange, NotAService, RolloutInProgress, WindowActive
from scheduling.groups.replica_state import member_ready, ready_replica_count
from scheduling.groups.stop import task_group_stop
from scheduling.groups.submit import task_group_submit
from scheduling.models import Task, TaskGroup
from scheduling.selectors import group_list_visible_to, group_members, groups_visible_to


class TaskGroupOutput(serializers.ModelSerializer):
    tenant = serializers.IntegerField(source="tenant_id")
    members = serializers.SerializerMethodField()
    diagnostics = serializers.SerializerMethodField()
    ready_replicas = serializers.SerializerMethodField(help_text="live replicas that are ready (design §17.2)")

    class Meta:
        model = TaskGroup
        fields = ["id", "tenant", "name", "type", "status", "world_size", "gpus_per_worker", "gpu_type", "parallelism",
                  "replicas", "ready_replicas", "window", "window_applied", "max_restarts", "restarts", "master_addr",
                  "backend", "tolerations", "node_selector", "labels", "image", "command", "env", "revision",
                  "max_surge", "max_unavailable", "ready_timeout_seconds", "readiness", "model", "min_available",
                  "spread", "autoscale", "nodes_per_replica", "timeout_seconds", "termination_grace_seconds",
                  "stopped_at", "created_at", "members", "diagnostics"]

    def get_members(self, group: TaskGroup) -> list[dict]:
        """Each member; one of a multi-node replica (design §17.1) with its `replica`, its rank inside it and the
        master address and backend of that replica."""
        return [_member(group, task) for task in group_members(group)]

    def get_ready_replicas(self, group: TaskGroup) -> int:
        return ready_replica_count(group, group_members(group))

    def get_diagnostics(self, group: TaskGroup) -> dict | None:
        return group.diagnostics or None


def _member(group: TaskGroup, task: Task) -> dict:
    # A training gang has one master; each multi-node replica its own, in its members' environment.
    master_addr, backend = (member_communication(task.env) if task.replica is not None
                            else (group.master_addr, group.backend))
    return {"task": task.id, "replica": task.replica, "rank": task.rank, "status": task.status,
            "node": task.node.name if task.node_id else None, "gpus": task.gpus,
            "master_addr": master_addr or None, "backend": backend or None,
            "revision": task.revision, "ready": member_ready(group, task)}


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

    @extend_schema(request=TaskGroupChangeInput, responses={
        200: TaskGroupOutput, **refusals(NotAllowed, TooManyPending, GroupStopped, WindowActive, RolloutInProgress,
                                          NotAService, NoChange)})
    def patch(self, request, group_id: int):
        """Scale (`replicas`; 0 is scaled to zero, not stopped) and/or roll out a new revision (`image`, `command`,
        `env`) of an inference group (design §17.2)."""
        group = get_object_or_404(groups_visible_to(request.user), id=group_id)
        payload = TaskGroupChangeInput(data=request.data)
        payload.is_valid(raise_exception=True)
        task_group_change(group=group, fields=payload.validated_data)
        return Response(TaskGroupOutput(groups_visible_to(request.user).get(id=group_id)).data)


class TaskGroupStopApi(APIView):
    @extend_schema(request=None, responses={200: TaskGroupOutput, **refusals(GroupStopped)})
    def post(self, request, group_id: int):
        """Stop every replica gracefully; nothing is rebuilt and the group ends `stopped` (design §17.2)."""
        group = get_object_or_404(groups_visible_to(request.user), id=group_id)
        task_group_stop(group=group)
        return Response(TaskGroupOutput(groups_visible_to(request.user).get(id=group_id)).data)


class EndpointOutput(serializers.Serializer):
    task = serializers.IntegerField()
    replica = serializers.IntegerField(allow_null=True)
    node = serializers.CharField()
    address = serializers.CharField(allow_null=True, help_text="the node's internal address")
    port = serializers.IntegerField(allow_null=True, help_text="the port published on it")


class TaskGroupEndpointsApi(APIView):
    @extend_schema(responses=EndpointOutput(many=True))
    def get(self, request, group_id: int):
        """The ready replicas' addresses, for a router or a load balancer's configuration (design §17.2)."""
        group = get_object_or_404(groups_visible_to(request.user), id=group_id)
        return Response(EndpointOutput(group_endpoints(group), many=True).data)


class RevisionOutput(serializers.Serializer):
    number = serializers.IntegerField()
    image = serializers.CharField()
    command = serializers.CharField()
    env = serializers.DictField(child=serializers.CharField())
    state = serializers.ChoiceField(choices=["rolling_out", "rolling_back", "complete", "rolled_back", "superseded"])
    reason = serializers.CharField()
    current = serializers.BooleanField(help_text="the revision new replicas are made of")
    replicas = serializers.IntegerField(help_text="its live replicas now")
    ready = serializers.IntegerField(help_text="of which ready")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class TaskGroupRevisionsApi(APIView):
    @extend_schema(responses=RevisionOutput(many=True))
    def get(self, request, group_id: int):
        """The group's revisions, newest first, each with its replicas and how its rollout ended."""
        group = get_object_or_404(groups_visible_to(request.user), id=group_id)
        return Response(RevisionOutput(group_revisions(group), many=True).data)
