"""The one validation of a task group submission, shared by the API and the group form (as task_input for tasks)."""

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from heteroflow_site.serializers import StrictSerializer
from heteroflow_site.validation import (
    IMAGE_MAX_LENGTH,
    REPLICAS_MAX,
    WORLD_SIZE_MAX,
    ColumnIntegerField,
    CommandField,
    ImageField,
    LabelsField,
    NameField,
    oci_image_reference,
)
from nodes.gpu_type_input import GpuTypeField
from nodes.taint_input import tolerations_field
from scheduling.api.env_input import EnvField
from scheduling.api.task_input import grace_field, only_for_types, timeout_field, valid_task_labels
from scheduling.framework.group_spread import SPREAD_ACROSS
from scheduling.groups.autoscale_rule import METRICS
from scheduling.models import Parallelism, TaskType

INFERENCE_ONLY = "applies to inference groups only"

# A replica spread over more nodes than this (512 cards of 8-card nodes) is no service anyone runs; the bound keeps
# one submission's members within reason.
NODES_PER_REPLICA_MAX = 64
READY_TIMEOUT_MAX_SECONDS = 86_400
PROBE_PATH_MAX_LENGTH = 1024
# What a model artifact is called (design §17.2, model distribution): `qwen2-7b-instruct`, `llama/3.1-8b:fp8`.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$"


class ScheduleWindowInput(StrictSerializer):
    days = serializers.ListField(child=serializers.IntegerField(min_value=0, max_value=6), required=False)
    start = serializers.RegexField(r"^\d{2}:\d{2}$")
    end = serializers.RegexField(r"^\d{2}:\d{2}$")
    timezone = serializers.CharField(max_length=64, required=False, default="UTC")
    action = serializers.ChoiceField(choices=["pause", "scale", "stop"])
    scale_to = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX, required=False)


class ReadinessInput(StrictSerializer):
    """How the node agent probes a replica (design §17.2): HTTP GET `path` on the replica's published port (or
    `port`), every `period_seconds`; a replica that was ready and fails `failure_threshold` probes in a row is
    restarted."""

    path = serializers.RegexField(r"^/[^\u0000-\u0020\u007f]*$", max_length=PROBE_PATH_MAX_LENGTH,
                                  help_text="starts with `/`, no spaces or control characters")
    # Within the host ports replicas are published on (the scheduler's `port_range_start`–`port_range_end`).
    port = serializers.IntegerField(min_value=settings.SCHEDULER["port_range_start"],
                                    max_value=settings.SCHEDULER["port_range_end"], required=False, allow_null=True,
                                    default=None)
    period_seconds = serializers.IntegerField(min_value=1, max_value=3600, required=False, default=10)
    failure_threshold = serializers.IntegerField(min_value=1, max_value=100, required=False, default=3)


class SpreadInput(StrictSerializer):
    """How the replicas spread (design §17.2): over nodes, racks or zones, at most `max_skew` more in one domain
    than in the emptiest; `hard` refuses a node that would break it, otherwise it is a preference."""

    across = serializers.ChoiceField(choices=list(SPREAD_ACROSS))
    max_skew = serializers.IntegerField(min_value=1, max_value=REPLICAS_MAX, required=False, default=1)
    hard = serializers.BooleanField(required=False, default=False)


@extend_schema_field({"type": "number", "exclusiveMinimum": 0})
class AboveZeroField(serializers.FloatField):
    """A number above 0, as the schema states it (DRF's `min_value` is inclusive)."""

    def to_internal_value(self, data) -> float:
        value = super().to_internal_value(data)
        if not value > 0:
            raise serializers.ValidationError("must be above 0")
        return value


class AutoscaleInput(StrictSerializer):
    """The autoscaler's bounds, metric and target per replica (design §17.2). `metric_name`: the Prometheus metric
    the agent reads from each replica's `/metrics` for `requests_per_second` and `queue_length` (default: the
    metric's own name); `gpu_utilization` comes from the vendor tool."""

    min = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX)
    max = serializers.IntegerField(min_value=1, max_value=REPLICAS_MAX)
    metric = serializers.ChoiceField(choices=list(METRICS))
    target = AboveZeroField(help_text="the metric's value per replica to hold; above 0")
    scale_down_delay_seconds = serializers.IntegerField(min_value=0, max_value=86_400, required=False, default=300)
    metric_name = serializers.RegexField(r"^[a-zA-Z_:][a-zA-Z0-9_:]{0,199}$", required=False, default=None,
                                         allow_null=True)

    def validate(self, attrs):
        if attrs["min"] > attrs["max"]:
            raise serializers.ValidationError({"min": [f"above max ({attrs['max']})"]})
        return attrs


def readiness_field(**kwargs) -> ReadinessInput:
    return ReadinessInput(required=False, allow_null=True, default=None, **kwargs)


class TaskGroupInput(StrictSerializer):
    name = NameField()
    type = serializers.ChoiceField(choices=["training", "inference"])
    world_size = serializers.IntegerField(min_value=1, max_value=WORLD_SIZE_MAX)
    gpus_per_worker = serializers.IntegerField(min_value=0, max_value=64)
    gpu_type = GpuTypeField(required=False, allow_blank=True, default="")
    parallelism = serializers.ChoiceField(choices=Parallelism.choices, required=False, default=Parallelism.DATA)
    replicas = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX, required=False, allow_null=True,
                                        default=None)
    window = ScheduleWindowInput(required=False, allow_null=True, default=None)
    image = ImageField()
    command = CommandField()
    # Absent: min(50, the tenant's max_priority) (design §16.2).
    priority = serializers.IntegerField(min_value=0, max_value=100, required=False, default=None)
    max_restarts = serializers.IntegerField(min_value=0, max_value=100, required=False, default=3)
    tolerations = tolerations_field(required=False, default=list)
    node_selector = LabelsField(required=False, default=dict)
    labels = LabelsField(required=False, default=dict, help_text="every member's labels, as a task's")
    tenant = ColumnIntegerField(min_value=1, required=False, allow_null=True, default=None)
    env = EnvField()
    # The rollout and readiness of an inference group (design §17.2).
    max_surge = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX, required=False, default=1)
    max_unavailable = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX, required=False, default=0)
    ready_timeout_seconds = serializers.IntegerField(min_value=1, max_value=READY_TIMEOUT_MAX_SECONDS,
                                                     required=False, default=600)
    readiness = readiness_field()
    # The disruption budget (design §17.2): at most the replica count.
    min_available = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX, required=False, allow_null=True,
                                             default=None,
                                             help_text="ready replicas drain, defrag, reclaim and rollouts keep")
    spread = SpreadInput(required=False, allow_null=True, default=None)
    autoscale = AutoscaleInput(required=False, allow_null=True, default=None)
    model = serializers.RegexField(MODEL_NAME_PATTERN, required=False, allow_blank=True, default="",
                                   help_text="the model artifact the group serves; nodes holding it score higher")
    # design §17.1: each replica that many members of `gpus_per_worker` cards, one per node, placed whole.
    nodes_per_replica = serializers.IntegerField(
        min_value=1, max_value=NODES_PER_REPLICA_MAX, required=False, default=1,
        help_text="members per replica, one per node, placed whole (inference groups; above 1 needs "
                  "gpus_per_worker of at least 1)")
    # Every member's (design §17.1).
    timeout_seconds = timeout_field()
    termination_grace_seconds = grace_field()

    def validate_labels(self, labels: dict[str, str]) -> dict[str, str]:
        return valid_task_labels(labels)

    @classmethod
    def request_schema(cls, schema: dict) -> dict:
        schema = only_for_types(schema, [TaskType.TRAINING], {"replicas": {"type": "null"},
                                                              "window": {"type": "null"},
                                                              "min_available": {"type": "null"},
                                                              "spread": {"type": "null"},
                                                              "autoscale": {"type": "null"},
                                                              "nodes_per_replica": {"const": 1}})
        # A replica over several nodes is of members with cards (design §17.1).
        cardless = {"if": {"properties": {"gpus_per_worker": {"const": 0}}, "required": ["gpus_per_worker"]},
                    "then": {"properties": {"nodes_per_replica": {"const": 1}}}}
        return {**schema, "allOf": [*schema["allOf"], cardless]}

    def validate(self, data: dict) -> dict:
        # A training gang is `world_size` members, placed whole: no replica count, no window (a 400 the schema
        # states, `request_schema`).
        if data["type"] == TaskType.TRAINING:
            errors = {name: [INFERENCE_ONLY] for name in ("replicas", "window", "min_available", "spread",
                                                                          "autoscale")
                      if data.get(name) is not None}
            if data["nodes_per_replica"] != 1:
                errors["nodes_per_replica"] = [f"{INFERENCE_ONLY}: a training gang is world_size members already"]
            if errors:
                raise serializers.ValidationError(errors)
        if data["nodes_per_replica"] > 1 and data["gpus_per_worker"] == 0:
            raise serializers.ValidationError({"nodes_per_replica": [
                "a replica over several nodes is of members with cards: give gpus_per_worker of at least 1"]})
        replicas = data.get("replicas") if data.get("replicas") is not None else data["world_size"]
        if data.get("min_available") is not None and data["min_available"] > replicas:
            raise serializers.ValidationError({"min_available": [
                f"at most the group's {replicas} replica(s): a budget above it would hold every drain for ever"]})
        return data


class TaskGroupChangeInput(StrictSerializer):
    """`PATCH /api/v1/task-groups/{id}` (design §17.2): `replicas` scales; `image`, `command` and/or `env` make a new
    revision, rolled out. At least one of them."""

    replicas = serializers.IntegerField(min_value=0, max_value=REPLICAS_MAX, required=False)
    image = serializers.CharField(max_length=IMAGE_MAX_LENGTH, required=False, allow_blank=True,
                                  validators=[oci_image_reference])
    command = CommandField(default=empty)
    env = EnvField(default=empty)

    def validate(self, attrs):
        attrs = {name: value for name, value in attrs.items() if value is not None}
        if not attrs:
            raise serializers.ValidationError({"replicas": ["give replicas, image, command or env"]})
        return attrs
