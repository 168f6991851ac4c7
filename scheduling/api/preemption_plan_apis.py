from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import APIView

from scheduling.selectors import tasks_visible_to
from scheduling.what_if.preemption_plan import preemption_plan
from tenants.selectors import tenant_of


class PreemptionPlanOutput(serializers.Serializer):
    node = serializers.CharField(required=False, help_text="the node eviction would free")
    victims = serializers.ListField(child=serializers.DictField(), required=False,
                                    help_text="[{task, priority}]; task is null for another tenant's victim")
    other_tenants_victims = serializers.IntegerField(required=False)
    frees = serializers.DictField(required=False, help_text="{gpus, cards, gpu_memory_mb, cpu_cores, memory_mb}")
    stopping = serializers.BooleanField(required=False, help_text="the victims were evicted already and are stopping")
    reclaim = serializers.BooleanField(required=False, help_text="a reclaim (design §16.2): the victims are work "
                                                                 "the task's cohort borrows from its tenant's quota")
    code = serializers.CharField(required=False, help_text="why nothing would be evicted")
    message = serializers.CharField(required=False)
    node_reasons = serializers.DictField(required=False, help_text="staff only: each node's reason (at most 20)")
    node_reason_counts = serializers.DictField(required=False, help_text="how many nodes gave each reason")


class PreemptionPlanThrottle(UserRateThrottle):
    """Apart from the user's general budget: one plan builds a snapshot of the whole cluster (~1 s at 5,000 nodes)."""

    scope = "preemption_plan"


class PreemptionPlanApi(APIView):
    """`GET /api/v1/tasks/{id}/preemption-plan` (the task's tenant or staff): what the preempt PostFilter would do
    for this pending task now, evicting nobody."""

    throttle_classes = [*APIView.throttle_classes, PreemptionPlanThrottle]

    @extend_schema(responses=PreemptionPlanOutput)
    def get(self, request, task_id: int):
        task = get_object_or_404(tasks_visible_to(request.user), id=task_id)
        viewer = tenant_of(request.user)
        return Response(preemption_plan(task=task, viewer_tenant_id=viewer.id if viewer else None))
