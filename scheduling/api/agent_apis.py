"""The node agent's routes about its tasks: the work list it polls and the status it reports."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from heteroflow_site.serializers import StrictSerializer, validated
from nodes.authentication import AgentApi
from scheduling.lifecycle import IllegalTransition
from scheduling.models import TaskStatus
from scheduling.selectors import agent_work
from scheduling.services.agent_reports import AgentArcRefused, NotThisNodesTask, agent_report_status


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
