from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.permissions import IsAdmin
from scheduling.cycle.run import run_cycle
from scheduling.what_if.defrag_plan import defrag_plan


class SchedulerCycleApi(APIView):
    """`POST /api/v1/scheduler/cycles` (admin): run one scheduling cycle now."""

    permission_classes = [IsAdmin]

    class OutputSerializer(serializers.Serializer):
        considered = serializers.IntegerField()
        bound = serializers.IntegerField()
        failed = serializers.IntegerField()
        preempting = serializers.IntegerField()
        duration_ms = serializers.FloatField()

    @extend_schema(request=None, responses=OutputSerializer)
    def post(self, request):
        result = run_cycle(instance=f"api:{request.user.username}")
        return Response(self.OutputSerializer(result.as_dict()).data)


class DefragMoveOutput(serializers.Serializer):
    task = serializers.IntegerField()
    name = serializers.CharField()
    tenant = serializers.IntegerField()
    priority = serializers.IntegerField()
    gpu_required = serializers.IntegerField()
    cards = serializers.ListField(child=serializers.IntegerField(), help_text="its cards on the target")
    # `from` is a Python keyword: declared under another name, published as `from`.
    from_node = serializers.CharField(source="from", help_text="the node it leaves")
    to = serializers.CharField(help_text="the node it moves to (nominated there)")

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["from"] = data.pop("from_node")
        return data


class DefragJobOutput(serializers.Serializer):
    task = serializers.IntegerField()
    name = serializers.CharField()
    gpu_type = serializers.CharField()
    gpu_required = serializers.IntegerField()
    reserved_node = serializers.CharField(allow_null=True, help_text="the node held for it now")
    code = serializers.CharField(help_text="Moves, NoMoves or FitsWithoutMoves")
    message = serializers.CharField()
    node = serializers.CharField(allow_null=True, help_text="the node the moves would empty for it")
    moves = DefragMoveOutput(many=True)


class DefragPlanOutput(serializers.Serializer):
    enabled = serializers.BooleanField(help_text="whether the defrag plugin acts (the plan is shown either way)")
    max_moves = serializers.IntegerField()
    moves_per_hour = serializers.IntegerField()
    moves_last_hour = serializers.IntegerField()
    jobs = DefragJobOutput(many=True, help_text="each reserved job still waiting, oldest reservation first")


class DefragPlanApi(APIView):
    """`GET /api/v1/scheduler/defrag-plan` (admin, design §16.3): what defrag would move now for each reserved job,
    moving nothing."""

    permission_classes = [IsAdmin]

    @extend_schema(responses=DefragPlanOutput)
    def get(self, request):
        return Response(DefragPlanOutput(defrag_plan()).data)
