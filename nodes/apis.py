import ipaddress

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.permissions import IsAdmin
from heteroflow_site.serializers import StrictSerializer, StringMapField
from nodes.authentication import IsAdminOrJoinToken, IsNodeAgent, JoinTokenAuthentication, NodeTokenAuthentication
from nodes.models import GPU_TYPES, Node
from nodes.selectors import agent_work, node_detail, nodes_list, nodes_visible_to_tenant
from nodes.services import (
    KEEP,
    AgentArcRefused,
    NotThisNodesTask,
    agent_register,
    agent_report_status,
    node_heartbeat_apply,
    node_topology_update,
    node_update,
)
from scheduling.lifecycle import IllegalTransition
from scheduling.models import TaskStatus
from scheduling.node_lost import tasks_to_kill
from tenants.models import Tenant
from tenants.selectors import is_admin, tenant_of


def flat_errors(detail, prefix: str = "") -> dict[str, list[str]]:
    """Nested serializer errors as {"gpus[3].memory_total_mb": [...]}, so the body names the exact field."""
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            if isinstance(key, int):
                name = f"{prefix}[{key}]"
            elif key == "non_field_errors" and prefix:
                name = prefix
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            flat.update(flat_errors(value, name))
        return flat
    if isinstance(detail, list) and detail and all(isinstance(item, (dict, list)) for item in detail):
        flat = {}
        for position, item in enumerate(detail):
            flat.update(flat_errors(item, f"{prefix}[{position}]"))
        return flat
    messages = detail if isinstance(detail, list) else [detail]
    return {prefix or "detail": [str(message) for message in messages]}


def validated(serializer_class, data, **kwargs) -> dict:
    payload = serializer_class(data=data, **kwargs)
    if not payload.is_valid():
        raise exceptions.ValidationError(flat_errors(payload.errors))
    return payload.validated_data


class AgentApi(APIView):
    """Routes only a node agent may call; `request.auth` is its Node."""

    authentication_classes = [NodeTokenAuthentication]
    permission_classes = [IsNodeAgent]


class AgentRegisterApi(APIView):
    authentication_classes = [JoinTokenAuthentication, TokenAuthentication, SessionAuthentication]
    permission_classes = [IsAdminOrJoinToken]

    class InputSerializer(StrictSerializer):
        name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z", max_length=200)
        # Interface notation with the prefix length (SPEC §1), e.g. 10.0.3.7/24.
        internal_ip = serializers.CharField(max_length=64)
        public_ip = serializers.IPAddressField(required=False, allow_null=True, default=None)
        cpu_cores = serializers.IntegerField(min_value=0)
        memory_gb = serializers.IntegerField(min_value=0)

        def validate_internal_ip(self, value: str) -> str:
            try:
                ipaddress.ip_interface(value)
            except ValueError as exc:
                raise serializers.ValidationError(f"not an address with prefix length such as 10.0.3.7/24: {exc}")
            if "/" not in value:
                raise serializers.ValidationError("give the prefix length too, e.g. 10.0.3.7/24")
            return value

    class OutputSerializer(serializers.Serializer):
        node_id = serializers.IntegerField()
        token = serializers.CharField()

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer})
    def post(self, request):
        node, token = agent_register(**validated(self.InputSerializer, request.data))
        return Response(self.OutputSerializer({"node_id": node.id, "token": token}).data)


class AgentHeartbeatApi(AgentApi):
    class GpuInput(StrictSerializer):
        index = serializers.IntegerField(min_value=0, max_value=1023)
        uuid = serializers.CharField(max_length=128, allow_blank=True)
        type = serializers.ChoiceField(choices=GPU_TYPES)
        model = serializers.CharField(max_length=100, allow_blank=True)
        memory_total_mb = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        memory_used_mb = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        utilization = serializers.FloatField(min_value=0, max_value=100)
        temperature = serializers.FloatField(min_value=-50, max_value=200)
        numa = serializers.IntegerField(min_value=0, allow_null=True, required=False, default=None)

        def validate(self, attrs):
            if attrs["memory_used_mb"] > attrs["memory_total_mb"]:
                raise serializers.ValidationError({"memory_used_mb": ["exceeds memory_total_mb"]})
            return attrs

    class InputSerializer(StrictSerializer):
        cpu_percent = serializers.FloatField(min_value=0, max_value=100)
        memory_used_mb = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        gpus = serializers.ListField(max_length=1024)
        labels = StringMapField(required=False, default=dict)
        # The task ids whose containers the agent runs now (SPEC §15.4); the reply says which to kill.
        running = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
                                        max_length=4096, required=False, default=list)

        def validate_gpus(self, value):
            # Validated per card here so that errors carry the card's position: gpus[3].memory_total_mb.
            # A card is known by its type and index (each vendor numbers from 0) and by its uuid (SPEC §15.3).
            cards, errors, seen, uuids = [], {}, set(), set()
            for position, item in enumerate(value):
                card = AgentHeartbeatApi.GpuInput(data=item)
                if not card.is_valid():
                    errors[position] = card.errors
                    continue
                identity = (card.validated_data["type"], card.validated_data["index"])
                if identity in seen:
                    errors[position] = {"index": [f"{identity[0]} card index {identity[1]} reported twice"]}
                    continue
                uuid = card.validated_data["uuid"]
                if uuid and uuid in uuids:
                    errors[position] = {"uuid": [f"card uuid {uuid} reported twice"]}
                    continue
                seen.add(identity)
                uuids.add(uuid)
                cards.append(dict(card.validated_data))
            if errors:
                raise serializers.ValidationError(errors)
            return cards

    @extend_schema(request=InputSerializer, responses={200: inline_serializer("HeartbeatAck", {
        "node_id": serializers.IntegerField(), "status": serializers.CharField(),
        "kill": serializers.ListField(child=serializers.IntegerField())})})
    def post(self, request):
        report = validated(self.InputSerializer, request.data)
        running = report.pop("running")
        node = node_heartbeat_apply(node=request.auth, **report)
        return Response({"node_id": node.id, "status": node.status,
                         "kill": tasks_to_kill(node_id=node.id, running=running)})


class AgentWorkApi(AgentApi):
    @extend_schema(responses={200: inline_serializer("AgentWork", {
        "start": serializers.ListField(child=serializers.DictField()),
        "stop": serializers.ListField(child=serializers.DictField())})})
    def get(self, request):
        return Response(agent_work(request.auth))


class AgentTaskStatusApi(AgentApi):
    class InputSerializer(StrictSerializer):
        # "from" is a Python keyword, so it cannot be a class attribute: get_fields adds it.
        to = serializers.ChoiceField(choices=TaskStatus.choices)
        reason = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")

        def get_fields(self):
            fields = super().get_fields()
            fields["from"] = serializers.ChoiceField(choices=TaskStatus.choices)
            return fields

    @extend_schema(request=InputSerializer, responses={200: inline_serializer("AgentReport", {
        "won": serializers.BooleanField()}), 409: inline_serializer("AgentReportLost", {
        "won": serializers.BooleanField()})})
    def post(self, request, task_id: int):
        report = validated(self.InputSerializer, request.data)
        try:
            won = agent_report_status(node=request.auth, task_id=task_id, from_status=report["from"],
                                      to_status=report["to"], reason=report["reason"])
        except IllegalTransition as exc:
            raise exceptions.ValidationError({"to": [str(exc)]})
        except AgentArcRefused as exc:
            raise exceptions.PermissionDenied(str(exc))
        except NotThisNodesTask:
            raise exceptions.NotFound("no such task on this node")
        return Response({"won": won}, status=status.HTTP_200_OK if won else status.HTTP_409_CONFLICT)


class NodeOutput(serializers.ModelSerializer):
    dedicated_tenant = serializers.IntegerField(source="dedicated_tenant_id", allow_null=True)

    class Meta:
        model = Node
        fields = ["id", "name", "status", "schedulable", "dedicated_tenant", "region", "zone", "rack", "labels",
                  "internal_ip", "public_ip", "cpu_cores", "memory_gb", "cpu_percent", "memory_used_mb", "gpu_type",
                  "gpu_total", "gpu_used", "last_heartbeat_at"]


def _nodes_for(user):
    """Admins see every node; a tenant user those not dedicated to another tenant."""
    if is_admin(user):
        return Node.objects.all()
    tenant = tenant_of(user)
    return nodes_visible_to_tenant(tenant.id if tenant else None)


class NodeListApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=NodeOutput(many=True))
    def get(self, request):
        return Response(NodeOutput(nodes_list(request.query_params, queryset=_nodes_for(request.user)), many=True).data)


class NodeDetailApi(APIView):
    def get_permissions(self):
        return [IsAdmin()] if self.request.method == "PATCH" else [IsAuthenticated()]

    class PatchInput(StrictSerializer):
        labels = StringMapField(required=False)
        schedulable = serializers.BooleanField(required=False)
        dedicated_tenant = serializers.PrimaryKeyRelatedField(
            queryset=Tenant.objects.all(), required=False, allow_null=True
        )

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, node_id: int):
        node = get_object_or_404(_nodes_for(request.user).select_related("dedicated_tenant"), id=node_id)
        if is_admin(request.user):
            return Response(node_detail(node))
        tenant = tenant_of(request.user)
        return Response(node_detail(node, tenant_id=tenant.id if tenant else -1))

    @extend_schema(request=PatchInput, responses=OpenApiTypes.OBJECT)
    def patch(self, request, node_id: int):
        node = get_object_or_404(Node, id=node_id)
        changes = validated(self.PatchInput, request.data)
        node = node_update(node=node, labels=changes.get("labels"), schedulable=changes.get("schedulable"),
                           dedicated_tenant=changes.get("dedicated_tenant", KEEP), actor=request.user)
        return Response(node_detail(node))


class NodeTopologyApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        region = serializers.CharField(max_length=100, allow_blank=True)
        zone = serializers.CharField(max_length=100, allow_blank=True)
        rack = serializers.CharField(max_length=100, allow_blank=True)

    @extend_schema(request=InputSerializer, responses=OpenApiTypes.OBJECT)
    def put(self, request, node_id: int):
        node = get_object_or_404(Node, id=node_id)
        node = node_topology_update(node=node, actor=request.user, **validated(self.InputSerializer, request.data))
        return Response(node_detail(node))
