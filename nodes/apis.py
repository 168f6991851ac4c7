from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.pagination import PAGE_HEADERS, PAGE_PARAMETERS, LinkHeaderPagination
from heteroflow_site.permissions import IsAdmin, is_admin
from heteroflow_site.sentinels import KEEP
from heteroflow_site.serializers import StrictSerializer, validated
from heteroflow_site.validation import LabelsField, normalised_gpu_type
from nodes.card_health import card_release
from nodes.models import GPU, Node
from nodes.selectors import (
    CardHolders,
    DrainReader,
    no_card_holders,
    no_drain_reader,
    node_detail,
    nodes_list,
    nodes_visible_to_tenant,
)
from nodes.services import node_topology_update, node_update
from nodes.taint_input import taints_field
from tenants.models import Tenant
from tenants.selectors import tenant_of


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
                  "taints", "internal_ip", "public_ip", "cpu_cores", "memory_gb", "cpu_percent", "memory_used_mb",
                  "gpu_type", "gpu_total", "gpu_used", "last_heartbeat_at"]


def _nodes_for(user):
    """Admins see every node; a tenant user those not dedicated to another tenant."""
    if is_admin(user):
        return Node.objects.all()
    tenant = tenant_of(user)
    return nodes_visible_to_tenant(tenant.id if tenant else None)


class NodeListApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[*PAGE_PARAMETERS, *PAGE_HEADERS], responses=NodeOutput(many=True))
    def get(self, request):
        """By name, a page at a time (`limit`, `offset`; the `Link` header names the next page)."""
        nodes = nodes_list(request.query_params, queryset=_nodes_for(request.user))
        paginator = LinkHeaderPagination()
        page = paginator.paginate_queryset(nodes, request, view=self)
        output = NodeOutput(page, many=True, context={"staff": is_admin(request.user)})
        return paginator.get_paginated_response(output.data)


class NodeDetailApi(APIView):
    # The readers of the tasks holding each card and of the drain's progress, handed in by the route
    # (scheduling.api.urls).
    card_holders: CardHolders = staticmethod(no_card_holders)
    drain_reader: DrainReader = staticmethod(no_drain_reader)

    def get_permissions(self):
        return [IsAdmin()] if self.request.method == "PATCH" else [IsAuthenticated()]

    class PatchInput(StrictSerializer):
        labels = LabelsField(required=False)
        taints = taints_field(required=False)
        schedulable = serializers.BooleanField(required=False)
        dedicated_tenant = serializers.PrimaryKeyRelatedField(
            queryset=Tenant.objects.all(), required=False, allow_null=True
        )

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, node_id: int):
        node = get_object_or_404(_nodes_for(request.user).select_related("dedicated_tenant"), id=node_id)
        if is_admin(request.user):
            return Response(node_detail(node, card_holders=self.card_holders, drain_reader=self.drain_reader))
        tenant = tenant_of(request.user)
        return Response(node_detail(node, card_holders=self.card_holders, tenant_id=tenant.id if tenant else -1,
                                    drain_reader=self.drain_reader))

    @extend_schema(request=PatchInput, responses=OpenApiTypes.OBJECT)
    def patch(self, request, node_id: int):
        node = get_object_or_404(Node, id=node_id)
        changes = validated(self.PatchInput, request.data)
        node = node_update(node=node, labels=changes.get("labels"), taints=changes.get("taints"),
                           schedulable=changes.get("schedulable"), dedicated_tenant=changes.get("dedicated_tenant", KEEP), actor=request.user)
        return Response(node_detail(node, card_holders=self.card_holders, drain_reader=self.drain_reader))


class NodeTopologyApi(APIView):
    permission_classes = [IsAdmin]
    # As NodeDetailApi's: its answer is the node's detail.
    card_holders: CardHolders = staticmethod(no_card_holders)
    drain_reader: DrainReader = staticmethod(no_drain_reader)

    class InputSerializer(StrictSerializer):
        region = serializers.CharField(max_length=100, allow_blank=True)
        zone = serializers.CharField(max_length=100, allow_blank=True)
        rack = serializers.CharField(max_length=100, allow_blank=True)

    @extend_schema(request=InputSerializer, responses=OpenApiTypes.OBJECT)
    def put(self, request, node_id: int):
        node = get_object_or_404(Node, id=node_id)
        node = node_topology_update(node=node, actor=request.user, **validated(self.InputSerializer, request.data))
        return Response(node_detail(node, card_holders=self.card_holders, drain_reader=self.drain_reader))


class NodeCardReleaseApi(APIView):
    """design §17.3: an admin releases a quarantined card; 409 for a card that is not quarantined or still reports
    failed."""

    permission_classes = [IsAdmin]

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def post(self, request, node_id: int, card_type: str, index: int):
        node = get_object_or_404(Node, id=node_id)
        card = get_object_or_404(GPU, node=node, type=normalised_gpu_type(card_type), index=index)
        card = card_release(node=node, card=card, actor=request.user)
        return Response({"node": node.id, "type": card.type, "index": card.index, "health": card.health,
                         "quarantined": card.quarantined})
