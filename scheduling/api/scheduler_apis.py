from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.permissions import IsAdmin
from scheduling.cycle import run_cycle


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
