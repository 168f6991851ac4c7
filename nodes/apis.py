import ipaddress

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from knox.auth import TokenAuthentication
from rest_framework import exceptions, serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.permissions import IsAdmin, is_admin
from heteroflow_site.sentinels import KEEP
from heteroflow_site.serializers import StrictSerializer, validated
from heteroflow_site.validation import NAME_MAX_LENGTH, ColumnIntegerField, HeartbeatLabelsField, LabelsField
from nodes.authentication import AgentApi, JoinTokenAuthentication, MayRegisterNodes, NodeTokenAuthentication
from nodes.models import GPU_TYPES, Node
from nodes.selectors import node_detail, nodes_list, nodes_visible_to_tenant, tasks_to_kill
from nodes.services import (
    ReRegistrationRefused,
    agent_register,
    node_heartbeat_apply,
    node_topology_update,
    node_update,
)
from tenants.models import Tenant
from tenants.selectors import tenant_of


class AgentRegisterApi(APIView):
    authentication_classes = [JoinTokenAuthentication, NodeTokenAuthentication, TokenAuthentication,
                              SessionAuthentication]
    permission_classes = [MayRegisterNodes]

    class InputSerializer(StrictSerializer):
        name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=NAME_MAX_LENGTH)
        # Interface notation with the prefix length, e.g. 10.0.3.7/24.
        internal_ip = serializers.CharField(max_length=64)
        public_ip = serializers.IPAddressField(required=False, allow_null=True, default=None)
        cpu_cores = ColumnIntegerField()
        memory_gb = ColumnIntegerField()

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
        caller_node = request.auth if isinstance(request.auth, Node) else None
        try:
            node, token = agent_register(**validated(self.InputSerializer, request.data), by_node=caller_node,
                                         by_admin=is_admin(request.user))
        except ReRegistrationRefused as refusal:
            raise exceptions.PermissionDenied(str(refusal)) from None
        return Response(self.OutputSerializer({"node_id": node.id, "token": token}).data)


class HeartbeatGpuInput(StrictSerializer):
    """One card of a heartbeat."""

    index = serializers.IntegerField(min_value=0, max_value=1023)
    uuid = serializers.CharField(max_length=128, allow_blank=True)
    type = serializers.ChoiceField(choices=GPU_TYPES)
    model = serializers.CharField(max_length=100, allow_blank=True)
    memory_total_mb = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    memory_used_mb = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    utilization = serializers.FloatField(min_value=0, max_value=100)
    temperature = serializers.FloatField(min_value=-50, max_value=200)
    numa = ColumnIntegerField(allow_null=True, required=False, default=None)

    def validate(self, attrs):
        if attrs["memory_used_mb"] > attrs["memory_total_mb"]:
            raise serializers.ValidationError({"memory_used_mb": ["exceeds memory_total_mb"]})
        return attrs


class AgentHeartbeatApi(AgentApi):
    class InputSerializer(StrictSerializer):
        cpu_percent = serializers.FloatField(min_value=0, max_value=100)
        memory_used_mb = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        gpus = serializers.ListField(child=HeartbeatGpuInput(), max_length=1024)
        labels = HeartbeatLabelsField(required=False, default=dict)
        # The task ids whose containers the agent runs now (docs/scheduling.md, lost nodes); the reply says which
        # to kill.
        running = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
                                        max_length=4096, required=False, default=list)

        def validate_gpus(self, cards):
            # Each card is valid by now (errors name its position: gpus[3].memory_total_mb). A card is known by its
            # type and index (each vendor numbers from 0) and by its uuid: neither may repeat.
            errors, seen, uuids = {}, set(), set()
            for position, card in enumerate(cards):
                identity = (card["type"], card["index"])
                if identity in seen:
                    errors[position] = {"index": [f"{identity[0]} card index {identity[1]} reported twice"]}
                elif card["uuid"] and card["uuid"] in uuids:
                    errors[position] = {"uuid": [f"card uuid {card['uuid']} reported twice"]}
                seen.add(identity)
                uuids.add(card["uuid"])
            if errors:
                raise serializers.ValidationError(errors)
            return [dict(card) for card in cards]

    @extend_schema(request=InputSerializer, responses={200: inline_serializer("HeartbeatAck", {
        "node_id": serializers.IntegerField(), "status": serializers.CharField(),
        "kill": serializers.ListField(child=serializers.IntegerField())})})
    def post(self, request):
        report = validated(self.InputSerializer, request.data)
        running = report.pop("running")
        node = node_heartbeat_apply(node=request.auth, **report)
        return Response({"node_id": node.id, "status": node.status,
                         "kill": tasks_to_kill(node_id=node.id, running=running)})


class NodeOutput(serializers.ModelSerializer):
    """With `context={"staff": False}` (tenant users) the node's addresses are null."""

    dedicated_tenant = serializers.IntegerField(source="dedicated_tenant_id", allow_null=True)
    internal_ip = serializers.SerializerMethodField()
    public_ip = serializers.SerializerMethodField()

    def get_internal_ip(self, node: Node) -> str | None:
        return node.internal_ip if self.context.get("staff") else None

    def get_public_ip(self, node: Node) -> str | None:
        return node.public_ip if self.context.get("staff") else None

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
        nodes = nodes_list(request.query_params, queryset=_nodes_for(request.user))
        return Response(NodeOutput(nodes, many=True, context={"staff": is_admin(request.user)}).data)


class NodeDetailApi(APIView):
    def get_permissions(self):
        return [IsAdmin()] if self.request.method == "PATCH" else [IsAuthenticated()]

    class PatchInput(StrictSerializer):
        labels = LabelsField(required=False)
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
