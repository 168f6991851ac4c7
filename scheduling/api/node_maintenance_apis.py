"""Drain and uncordon (design §17.3), admins only: `POST /api/v1/nodes/{id}/drain {grace_seconds?}` and
`POST /api/v1/nodes/{id}/uncordon`; both answer with the node's detail."""

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.permissions import IsAdmin
from heteroflow_site.serializers import StrictSerializer, validated
from nodes.models import DRAIN_GRACE_MAX_SECONDS, Node
from nodes.selectors import node_detail
from scheduling.hardware.drain import drain_progress, node_drain, node_uncordon
from scheduling.selectors import node_card_holders


class NodeDrainApi(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(StrictSerializer):
        grace_seconds = serializers.IntegerField(min_value=0, max_value=DRAIN_GRACE_MAX_SECONDS, required=False,
                                                 allow_null=True, default=None)

    @extend_schema(request=InputSerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request, node_id: int):
        node = get_object_or_404(Node, id=node_id)
        body = validated(self.InputSerializer, request.data)
        node = node_drain(node=node, grace_seconds=body["grace_seconds"], actor=request.user)
        return Response(node_detail(node, card_holders=node_card_holders, drain_reader=drain_progress))


class NodeUncordonApi(APIView):
    permission_classes = [IsAdmin]

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def post(self, request, node_id: int):
        node = get_object_or_404(Node, id=node_id)
        node = node_uncordon(node=node, actor=request.user)
        return Response(node_detail(node, card_holders=node_card_holders, drain_reader=drain_progress))
