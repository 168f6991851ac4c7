from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.permissions import IsAdmin
from plugins_admin.change_input import PluginChangeInput, plugin_change_requests
from plugins_admin.what_if import plugin_change_preview


class WhatIfSideOutput(serializers.Serializer):
    plugins = serializers.DictField(help_text="the plugin set, as GET /api/v1/scheduler/plugins shows it")
    placements = serializers.ListField(child=serializers.DictField(), help_text="[{task, node, cards, code}]")
    placed = serializers.IntegerField()
    allocation = serializers.DictField(help_text="{gpu_total, gpu_used, percent, nodes: [{node, gpu_total, gpu_used}]}")


class WhatIfOutput(serializers.Serializer):
    considered = serializers.IntegerField(help_text="pending tasks placed on each side, in queue order (gang members "
                                                    "included)")
    gangs = serializers.IntegerField(help_text="training gangs among them, each placed whole as the cycle places it")
    not_previewed = serializers.ListField(child=serializers.CharField(),
                                          help_text="what only the live cluster answers: the Bind plugins, by name")
    current = WhatIfSideOutput()
    proposed = WhatIfSideOutput()
    moved = serializers.ListField(child=serializers.DictField(), help_text="[{task, from_node, to_node}]")
    newly_placed = serializers.ListField(child=serializers.IntegerField())
    newly_unplaced = serializers.ListField(child=serializers.IntegerField())
    fragmentation = serializers.DictField(help_text="{current, proposed}: free cards and cards usable by k-card tasks")


class WhatIfApi(APIView):
    """`POST /api/v1/scheduler/what-if` (admin): the plugin API's changes, previewed over the head of the pending
    queue against the cluster as it is now. Nothing is saved."""

    permission_classes = [IsAdmin]

    @extend_schema(request=PluginChangeInput(many=True), responses=WhatIfOutput)
    def post(self, request):
        return Response(plugin_change_preview(requests=plugin_change_requests(request.data)))
