"""The node agent's protocol, all of it (docs/scheduling.md, The agent): registration, the heartbeat (whose reply
says which of the tasks it runs to kill), the work list it polls and the status it reports."""

import ipaddress

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from heteroflow_site.permissions import is_admin
from heteroflow_site.serializers import StrictSerializer, validated
from heteroflow_site.validation import (
    NAME_MAX_LENGTH,
    ColumnIntegerField,
    HeartbeatLabelsField,
    normalised_gpu_type,
)
from nodes.agent.agent import GPU_TYPE_LABEL
from nodes.authentication import (
    JOIN_TOKEN,
    AgentApi,
    JoinTokenAuthentication,
    MayRegisterNodes,
    NodeTokenAuthentication,
)
from nodes.card_health import ERRORS_PER_CARD
from nodes.gpu_type_input import GpuTypeField
from nodes.models import CardHealth, Node
from nodes.services import ReRegistrationRefused, agent_register, node_heartbeat_apply
from scheduling.groups.readiness import readiness_apply
from scheduling.groups.replica_metrics import replica_metrics_apply
from scheduling.housekeeping.node_lost import fail_tasks_the_agent_lost, tasks_to_kill
from scheduling.lifecycle import IllegalTransition
from scheduling.models import TaskStatus
from scheduling.selectors import agent_work
from scheduling.services.agent_reports import AgentArcRefused, NotThisNodesTask, agent_report_status
from tenants.authentication import UserTokenAuthentication


class AgentRegisterApi(APIView):
    authentication_classes = [JoinTokenAuthentication, NodeTokenAuthentication, UserTokenAuthentication,
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
                                         by_admin=is_admin(request.user), by_join_token=request.auth == JOIN_TOKEN)
        except ReRegistrationRefused as refusal:
            raise exceptions.PermissionDenied(str(refusal)) from None
        return Response(self.OutputSerializer({"node_id": node.id, "token": token}).data)


class HeartbeatCardErrorInput(StrictSerializer):
    """One error a card's vendor tool reported (design §17.3)."""

    code = serializers.CharField(max_length=64)
    message = serializers.CharField(max_length=500, allow_blank=True)
    at = serializers.DateTimeField(allow_null=True, required=False, default=None)


class HeartbeatGpuInput(StrictSerializer):
    """One card of a heartbeat; `health` and `errors` (design §17.3) may be left out by agents that do not read
    health: the card is then `ok`."""

    index = serializers.IntegerField(min_value=0, max_value=1023)
    uuid = serializers.CharField(max_length=128, allow_blank=True)
    type = GpuTypeField()
    model = serializers.CharField(max_length=100, allow_blank=True)
    memory_total_mb = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    memory_used_mb = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    utilization = serializers.FloatField(min_value=0, max_value=100)
    temperature = serializers.FloatField(min_value=-50, max_value=200)
    numa = ColumnIntegerField(allow_null=True, required=False, default=None)
    health = serializers.ChoiceField(choices=CardHealth.choices, required=False, default=CardHealth.OK)
    errors = serializers.ListField(child=HeartbeatCardErrorInput(), max_length=ERRORS_PER_CARD, required=False,
                                   default=list)

    def validate(self, attrs):
        if attrs["memory_used_mb"] > attrs["memory_total_mb"]:
            raise serializers.ValidationError({"memory_used_mb": ["exceeds memory_total_mb"]})
        return attrs


class ReadinessReportInput(StrictSerializer):
    task = serializers.IntegerField(min_value=1, max_value=2**63 - 1)
    ready = serializers.BooleanField()
    failures = serializers.IntegerField(min_value=0, max_value=2**31 - 1,
                                        help_text="probes failed in a row since the last success")


class MetricReportInput(StrictSerializer):
    task = serializers.IntegerField(min_value=1, max_value=2**63 - 1)
    value = serializers.FloatField(min_value=0, max_value=1e12,
                                   help_text="the group's autoscaling metric as the replica reports it now")


class AgentHeartbeatApi(AgentApi):
    class InputSerializer(StrictSerializer):
        cpu_percent = serializers.FloatField(min_value=0, max_value=100)
        memory_used_mb = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        gpus = serializers.ListField(child=HeartbeatGpuInput(), max_length=1024)
        labels = HeartbeatLabelsField(required=False, default=dict)
        # The task ids whose containers the agent runs now (docs/scheduling.md, lost nodes); the reply says which
        # to kill.
        running = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
                                        max_length=4096, required=False, default=None)
        # The latest readiness probe of each replica that declares one (design §17.2).
        readiness = serializers.ListField(child=ReadinessReportInput(), max_length=4096, required=False,
                                          default=list)
        # The autoscaling metric of each replica of an autoscaled group running here (design §17.2).
        metrics = serializers.ListField(child=MetricReportInput(), max_length=4096, required=False, default=list)

        def validate_labels(self, labels: dict[str, str]) -> dict[str, str]:
            # The agent's own label naming its GPU type is stored as the type is (lower case).
            if GPU_TYPE_LABEL in labels:
                return {**labels, GPU_TYPE_LABEL: normalised_gpu_type(labels[GPU_TYPE_LABEL])}
            return labels

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
            return [{**card, "errors": [{**error, "at": error["at"].isoformat() if error["at"] else None}
                                        for error in card["errors"]]} for card in cards]

    @extend_schema(request=InputSerializer, responses={200: inline_serializer("HeartbeatAck", {
        "node_id": serializers.IntegerField(), "status": serializers.CharField(),
        "kill": serializers.ListField(child=serializers.IntegerField())})})
    def post(self, request):
        report = validated(self.InputSerializer, request.data)
        running = report.pop("running")
        readiness = report.pop("readiness")
        metrics = report.pop("metrics")
        node = node_heartbeat_apply(node=request.auth, **report)
        readiness_apply(node_id=node.id, reports=readiness)
        replica_metrics_apply(node_id=node.id, reports=metrics)
        if running is None:  # an agent that does not say what it runs: nothing to reconcile
            return Response({"node_id": node.id, "status": node.status, "kill": []})
        fail_tasks_the_agent_lost(node_id=node.id, running=running)
        return Response({"node_id": node.id, "status": node.status,
                         "kill": tasks_to_kill(node_id=node.id, running=running)})


class AgentWorkApi(AgentApi):
    @extend_schema(parameters=[OpenApiParameter("probes", enum=["1"], description="`1`: list `probe` too, the "
                                                "readiness of the replicas running here (after adopting them)")],
                   responses={200: inline_serializer("AgentWork", {
        "start": serializers.ListField(child=serializers.DictField()),
        "stop": serializers.ListField(child=serializers.DictField()),
        "probe": serializers.ListField(child=serializers.DictField())})})
    def get(self, request):
        return Response(agent_work(request.auth, probes=request.query_params.get("probes") == "1"))


class AgentTaskStatusApi(AgentApi):
    class InputSerializer(StrictSerializer):
        # "from" is a Python keyword, so it cannot be a class attribute: get_fields adds it.
        to = serializers.ChoiceField(choices=TaskStatus.choices)
        # Any length the body limit allows: an exit report is never dropped for a long error; the transition keeps
        # what fits.
        reason = serializers.CharField(required=False, allow_blank=True, default="")

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
