import ipaddress

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.permissions import IsAdmin
from heteroflow_site.permissions import is_admin
from heteroflow_site.serializers import StrictSerializer, StringMapField, validated
from heteroflow_site.sentinels import KEEP
from nodes.authentication import AgentApi, IsAdminOrJoinToken, JoinTokenAuthentication
from nodes.models import GPU_TYPES, Node
from nodes.selectors import node_detail, nodes_list, nodes_visible_to_tenant, tasks_to_kill
from nodes.services import agent_register, node_heartbeat_apply, node_topology_update, node_update
from tenants.models import Tenant
from tenants.selectors import tenant_of


class AgentRegisterApi(APIView):
    authentication_classes = [JoinTokenAuthentication, TokenAuthentication, SessionAuthentication]
    permission_classes = [IsAdminOrJoinToken]

    class InputSerializer(StrictSerializer):
        name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z", max_length=200)
        # Interface notation with the prefix length, e.g. 10.0.3.7/24.
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
